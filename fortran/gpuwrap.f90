! Fortran module `gpuwrap_core`: the C API of include/gpuwrap.h through iso_c_binding.
! Programs write `use gpuwrap` (gpuwrap_module*.f90), which gives this and, where the halo
! is built, module gpuwrap_halo's names too.
!
! * Every C function has an interface of the same name taking the same arguments (handles
!   are type(c_ptr); enums, flags and statuses integer(c_int); int64_t arrays
!   integer(c_int64_t)), and every fallible one returns the C status, integer(c_int).
!   Nullable array arguments (shape, strides, step) are OPTIONAL: absent passes NULL.
!   NOTE: absent strides mean C order, as in C; gw_wrap_array is the Fortran way in.
! * The functions that return C strings (gw_last_error, gw_strerror, gw_err_name,
!   gw_backend_name, gw_memkind_name, gw_dtype_name) return character(len=:), allocatable
!   under the same name; the raw const char* versions are the *_c interfaces.
! * Named constants (GW_OK ... GW_EBUSY, GW_BACKEND_*, GW_MEM_*, GW_BOOL ... GW_COMPLEX128,
!   GW_WRAP_*, GW_PTR_*, GW_MAX_DIMS) are generated from the C headers at build time
!   (gen_fortran.c), never typed in.
! * gw_wrap_array(ctx, a, out [, flags]) wraps a Fortran array of rank 0..15 of the kinds
!   integer(int8/16/32/64), real(real32/64), complex(real32/64) and logical(c_bool)
!   (GW_BOOL; default logical has no gpuwrap dtype), contiguous or any section: shape and
!   strides are the array's own, so gpuwrap dim d is Fortran dim d (column-major). The
!   actual argument must have the TARGET (or POINTER) attribute and stay where it is while
!   the array is wrapped (an allocatable must not be reallocated or deallocated first).
!   Only a variable is the caller's memory: a vector-subscripted section (a([1,3,5], :)) is
!   a copy, refused at compile time (the dummy is ASYNCHRONOUS); an expression (2*a, [x, y])
!   is a temporary that nothing tells apart at run time, so it is wrapped, and dangles once
!   the call returns: never pass one.
! * gw_fill_scalar(a, x) / gw_fill_async_scalar(a, x, s): gw_fill / gw_fill_async with a
!   Fortran scalar of those kinds (no c_loc of a TARGET variable needed).
module gpuwrap_core
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int8, int16, int32, int64, real32, real64
  implicit none

  include 'gpuwrap_constants.inc'

  ! gw_ptrinfo, field by field as the C struct (unsigned flags as c_int: same size).
  ! struct_size starts as this layout's size (gpuwrap.h, Conventions), so a declared
  ! variable is ready for gw_pointer_query.
  type, bind(c) :: gw_ptrinfo
    integer(c_size_t) :: struct_size = GW_PTRINFO_C_SIZE
    integer(c_int) :: kind = 0
    integer(c_int) :: device = -1
    type(c_ptr) :: base = c_null_ptr
    integer(c_size_t) :: extent = 0
    type(c_ptr) :: device_ptr = c_null_ptr
    type(c_ptr) :: host_ptr = c_null_ptr
    integer(c_int) :: flags = 0
  end type gw_ptrinfo

  ! gw_ipc_handle: the GW_IPC_HANDLE_BYTES plain bytes of an exported array (docs/IPC.md);
  ! send them any way (MPI, a file) and open them in another process with gw_ipc_open.
  type, bind(c) :: gw_ipc_handle
    integer(c_int8_t) :: bytes(GW_IPC_HANDLE_BYTES)
  end type gw_ipc_handle

  include 'gpuwrap_generic.inc'

  interface
    ! ---- errors ----------------------------------------------------------------------
    function gw_strerror_c(s) bind(c, name="gw_strerror") result(r)
      import :: c_int, c_ptr
      integer(c_int), value :: s
      type(c_ptr) :: r
    end function
    function gw_err_name_c(s) bind(c, name="gw_err_name") result(r)
      import :: c_int, c_ptr
      integer(c_int), value :: s
      type(c_ptr) :: r
    end function
    function gw_last_error_c() bind(c, name="gw_last_error") result(r)
      import :: c_ptr
      type(c_ptr) :: r
    end function
    ! ---- contexts --------------------------------------------------------------------
    function gw_context_create(backend, device, out) bind(c, name="gw_context_create") result(st)
      import :: c_int, c_ptr
      integer(c_int), value :: backend, device
      type(c_ptr), intent(out) :: out
      integer(c_int) :: st
    end function
    subroutine gw_context_destroy(ctx) bind(c, name="gw_context_destroy")
      import :: c_ptr
      type(c_ptr), value :: ctx
    end subroutine
    function gw_context_backend(ctx) bind(c, name="gw_context_backend") result(r)
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int) :: r
    end function
    function gw_context_device(ctx) bind(c, name="gw_context_device") result(r)
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int) :: r
    end function
    function gw_synchronize(ctx) bind(c, name="gw_synchronize") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int) :: st
    end function
    function gw_backend_name_c(b) bind(c, name="gw_backend_name") result(r)
      import :: c_int, c_ptr
      integer(c_int), value :: b
      type(c_ptr) :: r
    end function
    function gw_backend_device_count(b, count) bind(c, name="gw_backend_device_count") result(st)
      import :: c_int
      integer(c_int), value :: b
      integer(c_int), intent(out) :: count
      integer(c_int) :: st
    end function
    ! ---- pointer classification ------------------------------------------------------
    function gw_memkind_name_c(k) bind(c, name="gw_memkind_name") result(r)
      import :: c_int, c_ptr
      integer(c_int), value :: k
      type(c_ptr) :: r
    end function
    function gw_pointer_query(ctx, ptr, out) bind(c, name="gw_pointer_query") result(st)
      import :: c_int, c_ptr, gw_ptrinfo
      type(c_ptr), value :: ctx, ptr
      type(gw_ptrinfo), intent(inout) :: out ! inout: the library reads out%struct_size
      integer(c_int) :: st
    end function
    ! ---- arrays ----------------------------------------------------------------------
    function gw_dtype_size(t) bind(c, name="gw_dtype_size") result(r)
      import :: c_int, c_size_t
      integer(c_int), value :: t
      integer(c_size_t) :: r
    end function
    function gw_dtype_name_c(t) bind(c, name="gw_dtype_name") result(r)
      import :: c_int, c_ptr
      integer(c_int), value :: t
      type(c_ptr) :: r
    end function
    function gw_wrap(ctx, ptr, dtype, ndim, shape, strides, flags, out) bind(c, name="gw_wrap") result(st)
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: ctx, ptr
      integer(c_int), value :: dtype, ndim
      integer(c_int64_t), intent(in), optional :: shape(*), strides(*)
      integer(c_int), value :: flags
      type(c_ptr), intent(out) :: out
      integer(c_int) :: st
    end function
    ! deleter: c_funloc of a bind(c) subroutine (type(c_ptr), value :: ptr, user).
    function gw_wrap_with_deleter(ctx, ptr, dtype, ndim, shape, strides, flags, deleter, user, out) &
        bind(c, name="gw_wrap_with_deleter") result(st)
      import :: c_int, c_ptr, c_int64_t, c_funptr
      type(c_ptr), value :: ctx, ptr
      integer(c_int), value :: dtype, ndim
      integer(c_int64_t), intent(in), optional :: shape(*), strides(*)
      integer(c_int), value :: flags
      type(c_funptr), value :: deleter
      type(c_ptr), value :: user
      type(c_ptr), intent(out) :: out
      integer(c_int) :: st
    end function
    ! NOTE: C order (row-major), as in C.
    function gw_alloc(ctx, kind, dtype, ndim, shape, out) bind(c, name="gw_alloc") result(st)
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: ctx
      integer(c_int), value :: kind, dtype, ndim
      integer(c_int64_t), intent(in), optional :: shape(*)
      type(c_ptr), intent(out) :: out
      integer(c_int) :: st
    end function
    function gw_retain(a) bind(c, name="gw_retain") result(r)
      import :: c_ptr
      type(c_ptr), value :: a
      type(c_ptr) :: r
    end function
    subroutine gw_release(a) bind(c, name="gw_release")
      import :: c_ptr
      type(c_ptr), value :: a
    end subroutine
    function gw_data(a) bind(c, name="gw_data") result(r)
      import :: c_ptr
      type(c_ptr), value :: a
      type(c_ptr) :: r
    end function
    function gw_host_data(a) bind(c, name="gw_host_data") result(r)
      import :: c_ptr
      type(c_ptr), value :: a
      type(c_ptr) :: r
    end function
    function gw_kind(a) bind(c, name="gw_kind") result(r)
      import :: c_int, c_ptr
      type(c_ptr), value :: a
      integer(c_int) :: r
    end function
    function gw_device(a) bind(c, name="gw_device") result(r)
      import :: c_int, c_ptr
      type(c_ptr), value :: a
      integer(c_int) :: r
    end function
    function gw_array_dtype(a) bind(c, name="gw_array_dtype") result(r)
      import :: c_int, c_ptr
      type(c_ptr), value :: a
      integer(c_int) :: r
    end function
    function gw_ndim(a) bind(c, name="gw_ndim") result(r)
      import :: c_int, c_ptr
      type(c_ptr), value :: a
      integer(c_int) :: r
    end function
    ! const int64_t*: gw_array_shape / gw_array_strides give Fortran arrays.
    function gw_shape(a) bind(c, name="gw_shape") result(r)
      import :: c_ptr
      type(c_ptr), value :: a
      type(c_ptr) :: r
    end function
    function gw_strides(a) bind(c, name="gw_strides") result(r)
      import :: c_ptr
      type(c_ptr), value :: a
      type(c_ptr) :: r
    end function
    function gw_numel(a) bind(c, name="gw_numel") result(r)
      import :: c_int64_t, c_ptr
      type(c_ptr), value :: a
      integer(c_int64_t) :: r
    end function
    function gw_owns(a) bind(c, name="gw_owns") result(r)
      import :: c_int, c_ptr
      type(c_ptr), value :: a
      integer(c_int) :: r
    end function
    function gw_is_readonly(a) bind(c, name="gw_is_readonly") result(r)
      import :: c_int, c_ptr
      type(c_ptr), value :: a
      integer(c_int) :: r
    end function
    function gw_array_context(a) bind(c, name="gw_array_context") result(r)
      import :: c_ptr
      type(c_ptr), value :: a
      type(c_ptr) :: r
    end function
    ! start: 0-based, as in C (gpuwrap dim d is Fortran dim d for gw_wrap_array arrays).
    function gw_view(a, start, shape, step, out) bind(c, name="gw_view") result(st)
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: a
      integer(c_int64_t), intent(in) :: start(*), shape(*)
      integer(c_int64_t), intent(in), optional :: step(*)
      type(c_ptr), intent(out) :: out
      integer(c_int) :: st
    end function
    function gw_reshape(a, ndim, shape, out) bind(c, name="gw_reshape") result(st)
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: a
      integer(c_int), value :: ndim
      integer(c_int64_t), intent(in), optional :: shape(*)
      type(c_ptr), intent(out) :: out
      integer(c_int) :: st
    end function
    ! ---- memory from another process ----------------------------------------------------
    ! h is inout, not out: it is left as it was when the export fails.
    function gw_ipc_export(a, h) bind(c, name="gw_ipc_export") result(st)
      import :: c_int, c_ptr, gw_ipc_handle
      type(c_ptr), value :: a
      type(gw_ipc_handle), intent(inout) :: h
      integer(c_int) :: st
    end function
    function gw_ipc_open(ctx, h, out) bind(c, name="gw_ipc_open") result(st)
      import :: c_int, c_ptr, gw_ipc_handle
      type(c_ptr), value :: ctx
      type(gw_ipc_handle), intent(in) :: h
      type(c_ptr), intent(inout) :: out
      integer(c_int) :: st
    end function
    ! The handle (and the descriptors of pool and VMM memory) over a Unix socket's
    ! descriptor `sock` (SCM_RIGHTS; docs/IPC.md); h is untouched when a receive fails.
    function gw_ipc_handle_send(sock, h) bind(c, name="gw_ipc_handle_send") result(st)
      import :: c_int, gw_ipc_handle
      integer(c_int), value :: sock
      type(gw_ipc_handle), intent(in) :: h
      integer(c_int) :: st
    end function
    function gw_ipc_handle_recv(sock, h) bind(c, name="gw_ipc_handle_recv") result(st)
      import :: c_int, gw_ipc_handle
      integer(c_int), value :: sock
      type(gw_ipc_handle), intent(inout) :: h
      integer(c_int) :: st
    end function
    function gw_copy(dst, src) bind(c, name="gw_copy") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: dst, src
      integer(c_int) :: st
    end function
    function gw_fill(dst, value) bind(c, name="gw_fill") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: dst, value
      integer(c_int) :: st
    end function
    function gw_pin(ctx, ptr, bytes) bind(c, name="gw_pin") result(st)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: ctx, ptr
      integer(c_size_t), value :: bytes
      integer(c_int) :: st
    end function
    function gw_unpin(ctx, ptr, bytes) bind(c, name="gw_unpin") result(st)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: ctx, ptr
      integer(c_size_t), value :: bytes
      integer(c_int) :: st
    end function
    ! ---- streams ---------------------------------------------------------------------
    function gw_stream_create(ctx, out) bind(c, name="gw_stream_create") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      type(c_ptr), intent(out) :: out
      integer(c_int) :: st
    end function
    function gw_stream_wrap(ctx, native, out) bind(c, name="gw_stream_wrap") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx, native
      type(c_ptr), intent(out) :: out
      integer(c_int) :: st
    end function
    function gw_stream_native(s) bind(c, name="gw_stream_native") result(r)
      import :: c_ptr
      type(c_ptr), value :: s
      type(c_ptr) :: r
    end function
    subroutine gw_stream_destroy(s) bind(c, name="gw_stream_destroy")
      import :: c_ptr
      type(c_ptr), value :: s
    end subroutine
    function gw_stream_synchronize(s) bind(c, name="gw_stream_synchronize") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: s
      integer(c_int) :: st
    end function
    function gw_copy_async(dst, src, s) bind(c, name="gw_copy_async") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: dst, src, s
      integer(c_int) :: st
    end function
    function gw_fill_async(dst, value, s) bind(c, name="gw_fill_async") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: dst, value, s
      integer(c_int) :: st
    end function
    function gw_array_wait(a, s) bind(c, name="gw_array_wait") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: a, s
      integer(c_int) :: st
    end function
    function gw_array_pending(a) bind(c, name="gw_array_pending") result(r)
      import :: c_int, c_ptr
      type(c_ptr), value :: a
      integer(c_int) :: r
    end function
    ! ---- libc, for the strings ---------------------------------------------------------
    function c_strlen(s) bind(c, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function
  end interface
  private :: c_strlen, wrap_described

contains

  !> A NUL-terminated C string as a Fortran string ("" for NULL). Public: the halo module
  !> and users with their own C strings need it too.
  function gw_c_string(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer(c_size_t) :: n, i
    if (.not. c_associated(p)) then
      s = ''
      return
    end if
    n = c_strlen(p)
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function gw_c_string

  !> gw_last_error() as a Fortran string: read it right after a call returned an error.
  function gw_last_error() result(s)
    character(len=:), allocatable :: s
    s = gw_c_string(gw_last_error_c())
  end function
  function gw_strerror(st) result(s)
    integer(c_int), intent(in) :: st
    character(len=:), allocatable :: s
    s = gw_c_string(gw_strerror_c(st))
  end function
  function gw_err_name(st) result(s)
    integer(c_int), intent(in) :: st
    character(len=:), allocatable :: s
    s = gw_c_string(gw_err_name_c(st))
  end function
  function gw_backend_name(b) result(s)
    integer(c_int), intent(in) :: b
    character(len=:), allocatable :: s
    s = gw_c_string(gw_backend_name_c(b))
  end function
  function gw_memkind_name(k) result(s)
    integer(c_int), intent(in) :: k
    character(len=:), allocatable :: s
    s = gw_c_string(gw_memkind_name_c(k))
  end function
  function gw_dtype_name(t) result(s)
    integer(c_int), intent(in) :: t
    character(len=:), allocatable :: s
    s = gw_c_string(gw_dtype_name_c(t))
  end function

  !> The array's shape as a Fortran array (gw_shape, copied).
  function gw_array_shape(a) result(r)
    type(c_ptr), intent(in) :: a
    integer(c_int64_t), allocatable :: r(:)
    integer(c_int64_t), pointer :: p(:)
    call c_f_pointer(gw_shape(a), p, [gw_ndim(a)])
    r = p
  end function
  !> The array's strides in elements (gw_strides, copied).
  function gw_array_strides(a) result(r)
    type(c_ptr), intent(in) :: a
    integer(c_int64_t), allocatable :: r(:)
    integer(c_int64_t), pointer :: p(:)
    call c_f_pointer(gw_strides(a), p, [gw_ndim(a)])
    r = p
  end function
  !> Column-major (Fortran order) strides of a shape, for gw_wrap of raw memory.
  pure function gw_fortran_strides(shape) result(r)
    integer(c_int64_t), intent(in) :: shape(:)
    integer(c_int64_t) :: r(size(shape))
    integer :: d
    if (size(shape) == 0) return
    r(1) = 1
    do d = 2, size(shape)
      r(d) = r(d - 1) * max(shape(d - 1), 1_c_int64_t)
    end do
  end function

  ! The kind-independent half of gw_wrap_array: byte distances to element strides.
  ! bs(d) is the byte distance between neighbours along dim d, known when the array has
  ! elements and extent(d) > 1; elsewhere the stride is never used to reach an element
  ! and the contiguous column-major value is given. A distance that is not a whole number
  ! of elements (a component of a packed sequence type) cannot be described: GW_EINVAL,
  ! which gw_wrap reports as a misaligned pointer.
  function wrap_described(ctx, p, dtype, ndim, sh, bs, flags, out) result(st)
    type(c_ptr), intent(in) :: ctx, p
    integer(c_int), intent(in) :: dtype, ndim
    integer(c_int64_t), intent(in) :: sh(:), bs(:)
    integer(c_int), intent(in), optional :: flags
    type(c_ptr), intent(out) :: out
    integer(c_int) :: st, fl
    integer(c_int64_t) :: strides(size(sh)), es
    integer(c_intptr_t) :: bad
    integer :: d
    fl = 0
    if (present(flags)) fl = flags
    es = int(gw_dtype_size(dtype), c_int64_t)
    out = c_null_ptr
    if (ndim < 0) then
      ! Let C say what is wrong (ndim), so gw_last_error() describes this failure too.
      st = gw_wrap(ctx, p, dtype, ndim, sh, flags=fl, out=out)
      return
    end if
    strides = gw_fortran_strides(sh)
    if (ndim > 0 .and. all(sh(1:max(ndim, 1)) > 0)) then
      do d = 1, ndim
        if (sh(d) <= 1) cycle
        if (modulo(bs(d), es) /= 0) then
          ! gw_wrap refuses a pointer misaligned for its dtype with a message naming it
          bad = transfer(p, bad) + 1
          st = gw_wrap(ctx, transfer(bad, p), dtype, ndim, sh, strides, fl, out)
          return
        end if
        strides(d) = bs(d) / es
      end do
    end if
    if (ndim == 0) then
      st = gw_wrap(ctx, p, dtype, 0, flags=fl, out=out)
    else
      st = gw_wrap(ctx, p, dtype, ndim, sh, strides, fl, out)
    end if
  end function wrap_described

  include 'gpuwrap_procedures.inc'

end module gpuwrap_core
