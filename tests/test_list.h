/*
 * Every test of the TEST_IMPL harness (tests/test.h), once: libuv's test/test-list.h.
 *
 * One section a test executable, `#define TEST_LIST_<executable>(T, H)`, whose lines are
 *
 *   T(name, backends, "VAR=value ...")   a test: `TEST_IMPL(name)` in that file; CTest runs
 *                                        it as <backend>.<executable>.<name> on each backend
 *                                        it names: ALL = every backend the file is built
 *                                        for (tests/CMakeLists.txt, gw_add_test_file's
 *                                        BACKENDS), or `cpu` = the CPU backend only (a test
 *                                        of the CPU model's own controls: on a GPU backend
 *                                        it could only skip, and under compute-sanitizer a
 *                                        process that never calls the runtime is an error);
 *                                        the string is extra environment for the test,
 *                                        space-separated VAR=value pairs ("" for none);
 *   H(name, function)                    a helper entry point: the file's tests start a
 *                                        second process running `function` by passing
 *                                        `name` as argv[1]; never a CTest test.
 *
 * The compiler reads this file (test.h builds each executable's table of cases from its
 * section: an unlisted TEST_IMPL does not compile, a listed test without one does not
 * link) and so does CMake (gw_add_test_file registers the tests from it), so the two
 * cannot disagree. Keep the lines in the files' order; a line of a section ends with `\`
 * except its last.
 */
#ifndef GW_TEST_LIST_H
#define GW_TEST_LIST_H

/* dlpack/test_dlpack.c */
#define TEST_LIST_test_dlpack(T, H)            \
  T(export_fields, ALL, "")                    \
  T(export_bad_args, ALL, "")                  \
  T(kind_host, ALL, "")                        \
  T(kind_pinned, ALL, "")                      \
  T(kind_device, ALL, "")                      \
  T(kind_managed, ALL, "")                     \
  T(export_as, ALL, "")                        \
  T(deleter_every_order, ALL, "")              \
  T(import_deleter_every_order, ALL, "")       \
  T(chain, ALL, "")                            \
  T(dtypes_both_ways, ALL, "")                 \
  T(strided_views, ALL, "")                    \
  T(zero_size, ALL, "")                        \
  T(byte_offset, ALL, "")                      \
  T(readonly_both_ways, ALL, "")               \
  T(version_refused, ALL, "")                  \
  T(malformed_fields, ALL, "")                 \
  T(malformed_legacy, ALL, "")                 \
  T(device_type_of_other_backend, ALL, "")     \
  T(legacy_both_ways, ALL, "")                 \
  T(null_strides_before_1_2, ALL, "")          \
  T(import_wrap_fails, cpu, "")                \
  T(refusal_message_survives_deleter, ALL, "") \
  T(capsule_destructor, ALL, "")               \
  T(extdev_import, cpu, "GPUWRAP_CPU_DEVICES=2")

/* gpu/test_classify.c */
#define TEST_LIST_test_classify(T, H) \
  T(table, ALL, "")                   \
  T(negative_ordinals, ALL, "")       \
  T(unknown_types, ALL, "")           \
  T(vmm_range, ALL, "")

/* gpu/test_cuda.c */
#define TEST_LIST_test_cuda(T, H) \
  T(device_memory, ALL, "")       \
  T(pinned_alloc, ALL, "")        \
  T(managed, ALL, "")             \
  T(malloc_async, ALL, "")        \
  T(registered_foreign, ALL, "")  \
  T(pageable_register, ALL, "")   \
  T(fill_sizes, ALL, "")          \
  T(fill_large, ALL, "")          \
  T(copy_roundtrip, ALL, "")      \
  T(current_device, ALL, "")      \
  T(two_devices, ALL, "")         \
  T(caller_context, ALL, "")      \
  T(own_context, ALL, "")

/* gpu/test_staging.c */
#define TEST_LIST_test_staging(T, H) \
  T(sizes, ALL, "")                  \
  T(small_chunks, ALL, "")           \
  T(threads, ALL, "")                \
  T(stores, ALL, "")                 \
  T(off, ALL, "")                    \
  T(managed, ALL, "")                \
  T(stream, ALL, "")                 \
  T(concurrent, ALL, "")             \
  T(current_device, ALL, "")         \
  T(bandwidth, ALL, "")              \
  T(ceiling, ALL, "")

/* gpu/test_vmm_cuda.c */
#define TEST_LIST_test_vmm_cuda(T, H)   \
  T(vmm_two_chunks, ALL, "")            \
  T(vmm_three_chunks, ALL, "")          \
  T(vmm_hole_and_end, ALL, "")          \
  T(pool_interior, ALL, "")             \
  T(pool_reuse, ALL, "")                \
  T(pool_trim_destroy, ALL, "")         \
  T(export_refused, ALL, "")            \
  T(pool_ipc_two_processes, ALL, "")    \
  T(vmm_ipc_two_processes, ALL, "")     \
  T(pool_ipc_cycles, ALL, "")           \
  T(vmm_ipc_cycles, ALL, "")            \
  T(fdpass_two_processes, ALL, "")      \
  H(pool_ipc_child, pool_ipc_child)     \
  H(vmm_ipc_child, vmm_ipc_child)       \
  H(pool_cycle_child, pool_cycle_child) \
  H(vmm_cycle_child, vmm_cycle_child)   \
  H(fdpass_cuda_child, fdpass_cuda_child)

/* gpu/test_streams_cuda.c */
#define TEST_LIST_test_streams_cuda(T, H) \
  T(borrow_nonblocking, ALL, "")          \
  T(native_of_created, ALL, "")           \
  T(array_wait, ALL, "")                  \
  T(borrow_default, ALL, "")              \
  T(wrong_device, ALL, "")                \
  T(foreign_handle, ALL, "")              \
  T(borrow_staged, ALL, "")

/* reliability/failure_sweep.c */
#define TEST_LIST_failure_sweep(T, H)                       \
  T(pageable, cpu, "")                                      \
  T(existing_1, cpu, "")                                    \
  T(foreign_1, cpu, "")                                     \
  T(mixed_2, cpu, "")                                       \
  T(mixed_3, cpu, "")                                       \
  T(pageable_no_host_ptr, cpu, "GPUWRAP_CPU_NO_HOST_PTR=1") \
  T(foreign_no_host_ptr, cpu, "GPUWRAP_CPU_NO_HOST_PTR=1")  \
  T(alloc_kinds, cpu, "")                                   \
  T(pin_loop, cpu, "")                                      \
  T(streams, cpu, "")                                       \
  T(own, cpu, "")                                           \
  T(context_query, cpu, "")                                 \
  T(dlpack, cpu, "")

/* reliability/fork.c */
#define TEST_LIST_fork(T, H) \
  T(inherited, cpu, "")      \
  T(busy, cpu, "")

/* reliability/stress.c */
#define TEST_LIST_stress(T, H) \
  T(threads, cpu, "")          \
  T(overlap_race, cpu, "")

/* staging/test_staging_model.c */
#define TEST_LIST_test_staging_model(T, H) \
  T(random, cpu, "GPUWRAP_STAGING_MIN=0")  \
  T(fail, cpu, "GPUWRAP_STAGING_MIN=0")    \
  T(bad_setting, cpu, "GPUWRAP_STAGING_MIN=0")

/* test_api_consistency.c */
#define TEST_LIST_test_api_consistency(T, H) \
  T(dlpack_zero_id_types, ALL, "")           \
  T(backend_out_of_range_einval, ALL, "")    \
  T(backend_auto_device_count_einval, ALL, "")

/* test_context.c */
#define TEST_LIST_test_context(T, H)            \
  T(create_destroy, ALL, "")                    \
  T(create_invalid, ALL, "")                    \
  T(auto_env_cpu, ALL, "GPUWRAP_BACKEND=cpu")   \
  T(devices_2dev, ALL, "GPUWRAP_CPU_DEVICES=2") \
  T(context_kept_alive_by_array, ALL, "")

/* test_copy.c */
#define TEST_LIST_test_copy(T, H)    \
  T(pairs_contiguous, ALL, "")       \
  T(pairs_strided_subblock, ALL, "") \
  T(pairs_transposed, ALL, "")       \
  T(mismatch_and_readonly, ALL, "")  \
  T(scalars_and_empty, ALL, "")      \
  T(two_devices_2dev, ALL, "GPUWRAP_CPU_DEVICES=2")

/* test_copy_many.c */
#define TEST_LIST_test_copy_many(T, H)   \
  T(independent_pairs_one_call, ALL, "") \
  T(dependent_pairs_in_order, ALL, "")   \
  T(aliasing_pair, ALL, "")              \
  T(bad_pair_copies_nothing, ALL, "")    \
  T(prepared_shell_boxes, ALL, "")       \
  T(prepared_boxes_that_meet, ALL, "")   \
  T(signalled_limits, cpu, "")

/* test_cpu_ipc_event.c */
#define TEST_LIST_test_cpu_ipc_event(T, H)                             \
  T(ordered_across_exec, cpu, "GPUWRAP_CPU_STREAM_DELAY_US=200000")    \
  T(ordered_across_fork, cpu, "GPUWRAP_CPU_STREAM_DELAY_US=200000")    \
  T(ordered_in_one_process, cpu, "GPUWRAP_CPU_STREAM_DELAY_US=200000") \
  T(wait_before_any_record, cpu, "")                                   \
  T(query_pending_then_complete, cpu, "")                              \
  T(open_refusals, cpu, "")                                            \
  T(inject_create_and_open, cpu, "")                                   \
  T(capture_refused, cpu, "")                                          \
  H(evt_child, child_main)

/* test_errors.c */
#define TEST_LIST_test_errors(T, H)      \
  T(err_names, ALL, "")                  \
  T(err_unknown, ALL, "")                \
  T(strerror_unknown_has_value, ALL, "") \
  T(dtype_sizes, ALL, "")                \
  T(kind_backend_names, ALL, "")         \
  T(last_error_per_thread, ALL, "")

/* test_fail.c */
#define TEST_LIST_test_fail(T, H)                               \
  T(fail_register, cpu, "")                                     \
  T(fail_second_register_undoes_first, cpu, "")                 \
  T(fail_alloc, cpu, "")                                        \
  T(fail_query, cpu, "")                                        \
  T(fail_copy_fill_sync, cpu, "")                               \
  T(fail_streams, cpu, "")                                      \
  T(fail_context_init, cpu, "")                                 \
  T(device_address, cpu, "")                                    \
  T(device_address_nohostptr, cpu, "GPUWRAP_CPU_NO_HOST_PTR=1") \
  T(fail_free, cpu, "")                                         \
  T(fail_unregister, cpu, "")                                   \
  T(env_fail_register, cpu, "GPUWRAP_CPU_FAIL=register:1")      \
  T(fail_async_each_step, cpu, "GPUWRAP_CPU_STREAM_DELAY_US=3000")

/* test_fail_sweep.c */
#define TEST_LIST_test_fail_sweep(T, H) T(every_failure_point, cpu, "")

/* test_fill.c */
#define TEST_LIST_test_fill(T, H)       \
  T(every_dtype_pageable_wrap, ALL, "") \
  T(every_dtype_every_kind, ALL, "")    \
  T(strided_views, ALL, "")             \
  T(periodic_values, ALL, "")           \
  T(fill_invalid, ALL, "")

/* test_graphs.c */
#define TEST_LIST_test_graphs(T, H)                    \
  T(replay, cpu, "")                                   \
  T(refused, cpu, "GPUWRAP_CPU_STREAM_DELAY_US=20000") \
  T(legacy_while_blocking_captures, cpu, "")           \
  T(two_captures, cpu, "")                             \
  T(join_two_streams, cpu, "")                         \
  T(other_thread_global, cpu, "")                      \
  T(model_rules, cpu, "")                              \
  T(captured_event_fails, cpu, "")                     \
  T(capture_begins_after_check, cpu, "GPUWRAP_CPU_STREAM_DELAY_US=20000")

/* test_graphs.c built with GWT_GRAPH_CUDA (tests/gpu: CUDA's capture control): the cases
 * that do not drive the CPU model's own controls */
#define TEST_LIST_test_graphs_cuda(T, H)     \
  T(replay, ALL, "")                         \
  T(refused, ALL, "")                        \
  T(legacy_while_blocking_captures, ALL, "") \
  T(two_captures, ALL, "")                   \
  T(other_thread_global, ALL, "")

/* test_holdings.c */
#define TEST_LIST_test_holdings(T, H)           \
  T(release_keeps_later_range_in_hole, cpu, "") \
  T(unpin_keeps_later_range_in_hole, cpu, "")   \
  T(failed_unregister_leaves_nothing, cpu, "")  \
  T(no_register_uses_any_pinning, cpu, "")      \
  T(no_register_of_pinned_roundtrip, ALL, "")

/* test_ipc.c */
#define TEST_LIST_test_ipc(T, H)                                                           \
  T(read_write_in_second_process, ALL, "")                                                 \
  T(views_with_offsets_and_strides, ALL, "")                                               \
  T(readonly_export, ALL, "")                                                              \
  T(two_opens_one_mapping, ALL, "")                                                        \
  T(open_release_cycles, ALL, "")                                                          \
  T(inject_open_and_close, cpu, "")                                                        \
  T(inject_export, cpu, "")                                                                \
  T(open_in_exporting_process, ALL, "")                                                    \
  T(open_in_exporter_checks_allocation, ALL, "")                                           \
  T(exec_is_not_the_exporter, cpu, "")                                                     \
  T(fork_child_opens_anew, cpu, "")                                                        \
  T(fork_during_open, cpu, "")                                                             \
  T(device_uuid_renumbered, cpu, "GPUWRAP_CPU_DEVICES=2")                                  \
  T(visible_devices_refused, cpu, "GPUWRAP_CPU_DEVICES=2 GPUWRAP_CPU_VISIBLE_DEVICES=1,1") \
  T(reused_address_without_alloc_id, cpu, "GPUWRAP_CPU_IPC_NO_ALLOC_ID=1")                 \
  T(damaged_and_truncated_handles, ALL, "")                                                \
  T(foreign_newer_and_missing_device, ALL, "")                                             \
  T(export_refuses_other_kinds, ALL, "")                                                   \
  T(geometry_limits, ALL, "")                                                              \
  T(event_orders_second_process, ALL, "GPUWRAP_CPU_STREAM_DELAY_US=300000")                \
  T(event_handles_and_arguments, ALL, "")                                                  \
  T(event_refused_in_capture, cpu, "")                                                     \
  T(event_injected_failures, cpu, "")                                                      \
  T(event_fork_child, cpu, "GPUWRAP_CPU_STREAM_DELAY_US=150000")                           \
  H(ipc_child, child_main)

/* test_ipc_pool.c */
#define TEST_LIST_test_ipc_pool(T, H) \
  T(pool_parent_to_child, cpu, "")    \
  T(pool_child_to_parent, cpu, "")    \
  T(pool_cycles, cpu, "")             \
  T(pool_injected_failures, cpu, "")  \
  H(pool_child, pool_child)

/* test_ipc_vmm.c */
#define TEST_LIST_test_ipc_vmm(T, H) \
  T(vmm_child_to_parent, cpu, "")    \
  T(vmm_cycles, cpu, "")             \
  T(vmm_injected_failures, cpu, "")  \
  T(vmm_export_limits, cpu, "")      \
  T(vmm_many_chunks, cpu, "")        \
  H(vmm_child, vmm_child)

/* test_ipc_fdpass.c */
#define TEST_LIST_test_ipc_fdpass(T, H) \
  T(fdpass_pool, cpu, "")               \
  T(fdpass_vmm, cpu, "")                \
  T(fdpass_vmm_many, cpu, "")           \
  T(fdpass_legacy, cpu, "")             \
  T(fdpass_bad_input, cpu, "")          \
  H(fdpass_child, fdpass_child)

/* test_overlap.c */
#define TEST_LIST_test_overlap(T, H)            \
  T(overlapping_copies, ALL, "")                \
  T(overlapping_copies_async, ALL, "")          \
  T(overlapping_views, ALL, "")                 \
  T(empty_with_huge_strides, ALL, "")           \
  T(empty_shape_any_order, ALL, "")             \
  T(broadcast_fake_counts, ALL, "")             \
  T(broadcast_rows_every_kind, ALL, "")         \
  T(interleaved_faces_copied_directly, ALL, "") \
  T(undecided_layouts_exact, ALL, "")           \
  T(undecided_layouts_large, ALL, "")

/* test_owned_spans.c */
#define TEST_LIST_test_owned_spans(T, H)             \
  T(own_interior_of_owned, ALL, "")                  \
  T(own_zero_elements, ALL, "")                      \
  T(own_of_foreign_registration_one_status, cpu, "") \
  T(own_over_deleter_array, ALL, "")

/* test_plugin_dir.c */
#define TEST_LIST_test_plugin_dir(T, H)                              \
  T(missing, cpu, "GPUWRAP_PLUGIN_DIR=/nonexistent/gpuwrap-plugins") \
  T(not_a_directory, cpu, "GPUWRAP_PLUGIN_DIR=/dev/null")

/* test_query.c */
#define TEST_LIST_test_query(T, H)                   \
  T(pageable, ALL, "")                               \
  T(device_pinned_managed, ALL, "")                  \
  T(registered_by_someone_else, cpu, "")             \
  T(other_device_2dev, ALL, "GPUWRAP_CPU_DEVICES=2") \
  T(query_invalid, ALL, "")                          \
  T(struct_size_guard, ALL, "")                      \
  T(struct_size_layouts, ALL, "")

/* test_readonly.c */
#define TEST_LIST_test_readonly(T, H)                                                \
  T(plain_register_of_readonly_pages_refused, cpu, "")                               \
  T(readonly_register_of_shared_and_anon, cpu, "")                                   \
  T(readonly_register_of_writable_memory, cpu, "")                                   \
  T(private_file_mapping_models_the_hang, cpu, "")                                   \
  T(mapping_boundaries, cpu, "")                                                     \
  T(long_map_lines, cpu, "")                                                         \
  T(map_read_in_forked_child, cpu, "")                                               \
  T(no_readonly_support_refuses_flag, cpu, "GPUWRAP_CPU_NO_READONLY_REGISTER=1")     \
  T(wrap_kernel_pages, ALL, "")                                                      \
  T(readonly_register_obeys_injection, cpu, "")                                      \
  T(wrap_readonly_anon, ALL, "")                                                     \
  T(wrap_readonly_shared_file, ALL, "")                                              \
  T(wrap_readonly_private_file, ALL, "")                                             \
  T(wrap_plain_of_readonly_pages, ALL, "")                                           \
  T(wrap_readonly_private_writable, ALL, "")                                         \
  T(wrap_readonly_without_device_support, ALL, "GPUWRAP_CPU_NO_READONLY_REGISTER=1") \
  T(write_into_readonly_host_only, ALL, "")                                          \
  T(write_into_readonly_host_only_hmm, cpu, "GPUWRAP_CPU_PAGEABLE_ACCESS=1")         \
  T(writable_wrap_sharing_readonly_registration, ALL, "")

/* test_registry.c */
#define TEST_LIST_test_registry(T, H)                              \
  T(two_wraps_register_once, cpu, "")                              \
  T(interior_pieces_one_page, cpu, "")                             \
  T(overlapping_wraps, cpu, "")                                    \
  T(adjacent_wraps, cpu, "")                                       \
  T(foreign_registration_in_span, cpu, "")                         \
  T(foreign_registration_at_start, cpu, "")                        \
  T(gpuwrap_registration_at_start, ALL, "")                        \
  T(foreign_unaligned_registration, cpu, "")                       \
  T(pin_loop_registers_once, ALL, "")                              \
  T(unpin_errors, ALL, "")                                         \
  T(two_registrations_nohostptr, cpu, "GPUWRAP_CPU_NO_HOST_PTR=1") \
  T(single_registration_nohostptr, cpu, "GPUWRAP_CPU_NO_HOST_PTR=1")

/* test_settings.c */
#define TEST_LIST_test_settings(T, H)                \
  T(table_rows, ALL, "")                             \
  T(parse_policy, ALL, "")                           \
  T(decimal_everywhere, ALL, "")                     \
  T(cpu_devices_010, ALL, "GPUWRAP_CPU_DEVICES=010") \
  T(cpu_devices_08, ALL, "GPUWRAP_CPU_DEVICES=08")   \
  T(bad_backend_refused, ALL, "")                    \
  T(bad_cpu_devices, ALL, "GPUWRAP_CPU_DEVICES=two")

/* test_stream_order.c */
#define TEST_LIST_test_stream_order(T, H)                                      \
  T(missing_wait, cpu, "GPUWRAP_CPU_STREAM_DELAY_US=150000")                   \
  T(host_read_before_sync, cpu, "GPUWRAP_CPU_STREAM_DELAY_US=150000")          \
  T(borrowed, cpu, "GPUWRAP_CPU_STREAM_DELAY_US=150000 GPUWRAP_CPU_DEVICES=2") \
  T(blocking, cpu, "GPUWRAP_CPU_STREAM_DELAY_US=150000")                       \
  T(pending, cpu, "GPUWRAP_CPU_STREAM_DELAY_US=150000")                        \
  T(dlpack_handover, cpu, "GPUWRAP_CPU_STREAM_DELAY_US=150000")                \
  T(inject_stream_ops, cpu, "")                                                \
  T(fork_child, cpu, "GPUWRAP_CPU_STREAM_DELAY_US=150000")                     \
  T(release_waits, cpu, "GPUWRAP_CPU_STREAM_DELAY_US=150000")                  \
  T(release_two_readers, cpu, "GPUWRAP_CPU_STREAM_DELAY_US=150000")            \
  T(wait_two_readers, cpu, "GPUWRAP_CPU_STREAM_DELAY_US=150000")

/* test_streams.c */
#define TEST_LIST_test_streams(T, H) \
  T(copy_fill_async, ALL, "")        \
  T(two_streams, ALL, "")            \
  T(stream_invalid, ALL, "")

/* test_threads.c */
#define TEST_LIST_test_threads(T, H)               \
  T(overlapping_wraps_8_threads, ALL, "")          \
  T(shared_array_refcount, ALL, "")                \
  T(concurrent_own_refused, ALL, "")               \
  T(warm_refs_outlive_unpin, ALL, "")              \
  T(warm_wraps_race_pin_unpin, ALL, "")            \
  T(context_destroyed_while_threads_wrap, ALL, "") \
  T(legacy_native_while_filling, ALL, "")

/* test_unmapped.c */
#define TEST_LIST_test_unmapped(T, H) \
  T(model_refuses_unmapped, cpu, "")  \
  T(wrap_unmapped, cpu, "")           \
  T(model_refuses_noaccess, cpu, "")

/* test_vmm.c */
#define TEST_LIST_test_vmm(T, H)  \
  T(vmm_two_chunks, cpu, "")      \
  T(vmm_three_chunks, cpu, "")    \
  T(vmm_hole_and_end, cpu, "")    \
  T(pool_interior, cpu, "")       \
  T(pool_reuse, cpu, "")          \
  T(pool_trim_destroy, cpu, "")   \
  T(export_refused, cpu, "")      \
  T(vmm_controls_refuse, cpu, "") \
  T(pageable_access_no_register, cpu, "GPUWRAP_CPU_PAGEABLE_ACCESS=1")

/* test_version.c */
#define TEST_LIST_test_version(T, H) \
  T(macros_match_project, ALL, "")   \
  T(library_string, ALL, "")

/* test_views.c */
#define TEST_LIST_test_views(T, H)              \
  T(view_steps_all_kinds, ALL, "")              \
  T(view_of_wrapped_pageable_outlives, ALL, "") \
  T(view_invalid, ALL, "")                      \
  T(reshape, ALL, "")                           \
  T(reshape_invalid, ALL, "")                   \
  T(column_major_to_row_major, ALL, "")         \
  T(reshape_to_scalar_null_shape, ALL, "")      \
  T(reshape_unit_dims_of_strided, ALL, "")

/* test_wrap_kinds.c */
#define TEST_LIST_test_wrap_kinds(T, H)                                                    \
  T(device_gw_alloc, ALL, "")                                                              \
  T(device_runtime_own, cpu, "")                                                           \
  T(device_other_2dev, ALL, "GPUWRAP_CPU_DEVICES=2")                                       \
  T(managed, ALL, "")                                                                      \
  T(pinned_allocated, ALL, "")                                                             \
  T(pinned_registered_by_someone_else, cpu, "")                                            \
  T(pageable_registered, ALL, "")                                                          \
  T(pageable_no_register, ALL, "")                                                         \
  T(pageable_own, ALL, "")                                                                 \
  T(pageable_own_no_register, ALL, "")                                                     \
  T(pageable_hmm, cpu, "GPUWRAP_CPU_PAGEABLE_ACCESS=1 GPUWRAP_CPU_STREAM_DELAY_US=150000") \
  T(pageable_next_to_backend_allocations, ALL, "")                                         \
  T(zero_elements, ALL, "")                                                                \
  T(alloc_kinds, ALL, "")

/* test_wrap_rules.c */
#define TEST_LIST_test_wrap_rules(T, H)     \
  T(deleter_once_after_views, ALL, "")      \
  T(deleter_not_called_on_failure, ALL, "") \
  T(double_own_portable, ALL, "")           \
  T(double_own_runtime, cpu, "")            \
  T(double_own_pageable, ALL, "")           \
  T(extent, ALL, "")                        \
  T(bad_input, ALL, "")

#endif /* GW_TEST_LIST_H */
