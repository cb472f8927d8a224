/* The bench's raw device fill (`gpuwrap bench`'s raw side, tools/raw_cuda.c), as PTX text:
 * one copy for the bench and for the probes that measure gpuwrap's fill against it
 * (tools/probes/fill_gap.cu). Loaded with cuModuleLoadData; entry
 * gw_raw_fill16(ptr, n16, word), launched on blocks of 256 threads. */
#ifndef GW_TOOLS_RAW_FILL_PTX_H
#define GW_TOOLS_RAW_FILL_PTX_H

/* Grid-stride fill with 16-byte stores: (ptr, n16, word). Checked with ptxas for sm_90. */
static const char fill_ptx[] =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry gw_raw_fill16(.param .u64 p_ptr, .param .u64 p_n, .param .u32 p_val)\n"
    "{\n"
    " .reg .pred %p<2>;\n .reg .b32 %r<6>;\n .reg .b64 %rd<8>;\n"
    " ld.param.u64 %rd1, [p_ptr];\n ld.param.u64 %rd2, [p_n];\n ld.param.u32 %r1, [p_val];\n"
    " cvta.to.global.u64 %rd1, %rd1;\n"
    " mov.u32 %r2, %ctaid.x;\n mov.u32 %r3, %ntid.x;\n mov.u32 %r4, %tid.x;\n"
    " cvt.u64.u32 %rd3, %r4;\n mad.wide.u32 %rd3, %r2, %r3, %rd3;\n"
    " mov.u32 %r5, %nctaid.x;\n mul.wide.u32 %rd4, %r5, %r3;\n"
    " setp.ge.u64 %p1, %rd3, %rd2;\n @%p1 bra DONE;\n"
    "LOOP:\n"
    " shl.b64 %rd5, %rd3, 4;\n add.s64 %rd6, %rd1, %rd5;\n"
    " st.global.v4.u32 [%rd6], {%r1, %r1, %r1, %r1};\n"
    " add.s64 %rd3, %rd3, %rd4;\n setp.lt.u64 %p1, %rd3, %rd2;\n @%p1 bra LOOP;\n"
    "DONE:\n ret;\n}\n";

#endif
