! fortran.api: the named constants against the C library (each value named as C names it,
! so a value that drifted from its C enum fails), errors (the C status and gw_last_error()
! as a Fortran string), and every other call of the module at least once: contexts,
! pointer query, gw_wrap with a deleter, alloc, views, reshape, pin, streams.
module test_api_deleter
  use, intrinsic :: iso_c_binding
  implicit none
  integer :: deleted = 0
contains
  ! a gw_deleter: counts its calls
  subroutine count_deleter(ptr, user) bind(c)
    type(c_ptr), value :: ptr, user
    if (c_associated(ptr) .and. .not. c_associated(user)) deleted = deleted + 1
  end subroutine
end module test_api_deleter

program test_api
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int32, int64, real32, real64, error_unit
  use gpuwrap
  use test_api_deleter
  implicit none
  interface
    function gw_cpu_live_registrations() bind(c, name="gw_cpu_live_registrations") result(n)
      import :: c_size_t
      integer(c_size_t) :: n
    end function
    function gw_cpu_live_allocations() bind(c, name="gw_cpu_live_allocations") result(n)
      import :: c_size_t
      integer(c_size_t) :: n
    end function
  end interface
  integer :: nfail, i
  integer(c_int) :: st, cnt
  type(c_ptr) :: ctx, a, a2, b, v, s, s2, ctx2
  type(gw_ptrinfo) :: pi
  real(real64), allocatable, target :: x(:,:), y(:)
  real(real32), pointer :: hp
  real(real64), target :: one
  integer(c_size_t) :: regs0, allocs0
  real(real64) :: r
  character(len=:), allocatable :: msg
  character(len=16), parameter :: status_names(13) = [character(len=16) :: 'GW_OK', 'GW_EINVAL', 'GW_ENOMEM', &
    'GW_ENODEV', 'GW_ENOTSUP', 'GW_ERANGE', 'GW_EDEVICE', 'GW_EOWNED', 'GW_EREADONLY', 'GW_EBACKEND', &
    'GW_EALREADY', 'GW_ENOTREG', 'GW_EBUSY']
  integer(c_int), parameter :: statuses(13) = [GW_OK, GW_EINVAL, GW_ENOMEM, GW_ENODEV, GW_ENOTSUP, GW_ERANGE, &
    GW_EDEVICE, GW_EOWNED, GW_EREADONLY, GW_EBACKEND, GW_EALREADY, GW_ENOTREG, GW_EBUSY]
  character(len=10), parameter :: dtype_names(15) = [character(len=10) :: 'bool', 'int8', 'int16', 'int32', &
    'int64', 'uint8', 'uint16', 'uint32', 'uint64', 'float16', 'bfloat16', 'float32', 'float64', 'complex64', &
    'complex128']
  integer(c_int), parameter :: dtypes(15) = [GW_BOOL, GW_INT8, GW_INT16, GW_INT32, GW_INT64, GW_UINT8, GW_UINT16, &
    GW_UINT32, GW_UINT64, GW_FLOAT16, GW_BFLOAT16, GW_FLOAT32, GW_FLOAT64, GW_COMPLEX64, GW_COMPLEX128]
  integer(c_size_t), parameter :: dtype_sizes(15) = [1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16]

  nfail = 0
  regs0 = gw_cpu_live_registrations()
  allocs0 = gw_cpu_live_allocations()

  ! ---- constants: named as C names them ----------------------------------------------
  do i = 1, size(statuses)
    if (gw_err_name(statuses(i)) /= trim(status_names(i))) call fail('status ' // trim(status_names(i)))
  end do
  if (gw_strerror(GW_EINVAL) /= 'invalid argument') call fail('gw_strerror')
  if (gw_err_name(-4242_c_int) /= 'GW_UNKNOWN') call fail('gw_err_name of an unknown value')
  do i = 1, size(dtypes)
    if (gw_dtype_name(dtypes(i)) /= trim(dtype_names(i))) call fail('dtype ' // trim(dtype_names(i)))
    if (gw_dtype_size(dtypes(i)) /= dtype_sizes(i)) call fail('dtype size ' // trim(dtype_names(i)))
  end do
  if (GW_DTYPE_COUNT /= size(dtypes)) call fail('GW_DTYPE_COUNT')
  if (gw_dtype_name(GW_DTYPE_COUNT) /= 'invalid') call fail('a dtype past the last')
  if (gw_backend_name(GW_BACKEND_AUTO) /= 'auto' .or. gw_backend_name(GW_BACKEND_CPU) /= 'cpu' .or. &
      gw_backend_name(GW_BACKEND_CUDA) /= 'cuda' .or. gw_backend_name(GW_BACKEND_HIP) /= 'hip') call fail('backends')
  if (gw_memkind_name(GW_MEM_UNKNOWN) /= 'unknown' .or. gw_memkind_name(GW_MEM_HOST) /= 'host' .or. &
      gw_memkind_name(GW_MEM_PINNED) /= 'pinned' .or. gw_memkind_name(GW_MEM_DEVICE) /= 'device' .or. &
      gw_memkind_name(GW_MEM_MANAGED) /= 'managed') call fail('memory kinds')
  if (c_sizeof(pi) /= GW_PTRINFO_C_SIZE) call fail('gw_ptrinfo layout')
  if (GW_MAX_DIMS < GW_F_MAX_RANK) call fail('GW_MAX_DIMS')

  ! ---- errors: the C status and its message --------------------------------------------
  st = gw_context_create(99_c_int, 0_c_int, ctx)
  call want(st, GW_EINVAL, 'context of backend 99')
  msg = gw_last_error()
  a2 = gw_last_error_c()
  if (index(msg, '99') == 0 .or. msg /= gw_c_string(a2)) call fail('message of backend 99: ' // msg)
  call want(gw_backend_device_count(GW_BACKEND_AUTO, cnt), GW_EINVAL, 'device count of AUTO')
  call want(gw_context_create(GW_BACKEND_CPU, 0_c_int, ctx), GW_OK, 'context')
  if (gw_context_backend(ctx) /= GW_BACKEND_CPU .or. gw_context_device(ctx) /= 0) call fail('context backend/device')
  call want(gw_backend_device_count(GW_BACKEND_CPU, cnt), GW_OK, 'device count')
  if (cnt < 1) call fail('cpu device count')
  call want(gw_wrap(ctx, c_null_ptr, GW_FLOAT64, 1, [-1_c_int64_t], flags=0_c_int, out=a), GW_EINVAL, 'negative extent')
  if (len(gw_last_error()) == 0) call fail('message of a negative extent')
  call want(gw_wrap(ctx, c_null_ptr, 99_c_int, 0, flags=0_c_int, out=a), GW_EINVAL, 'unknown dtype')

  ! ---- wrap, query, views, copies ------------------------------------------------------
  allocate(x(5, 4), y(20))
  call random_number(x)
  call want(gw_wrap_array(ctx, x, a), GW_OK, 'wrap x')
  call want(gw_pointer_query(ctx, c_loc(x(2, 1)), pi), GW_OK, 'query')
  if (pi%struct_size /= GW_PTRINFO_C_SIZE) call fail('gw_ptrinfo struct_size: the default is the C layout')
  if (pi%kind /= GW_MEM_PINNED .or. iand(pi%flags, GW_PTR_GPUWRAP_REGISTERED) == 0 .or. &
      .not. c_associated(pi%base, c_loc(x)) .or. pi%extent /= 160) then
    write (error_unit, *) 'query:', pi%kind, pi%device, pi%extent, pi%flags, c_associated(pi%base, c_loc(x))
    call fail('query of a wrapped array')
  end if
  a2 = gw_host_data(a)
  if (.not. c_associated(a2, c_loc(x)) .or. .not. c_associated(gw_data(a))) call fail('data pointers')
  ! registered host memory: pinned, of the context's device (as gw_wrap records it)
  if (gw_kind(a) /= GW_MEM_PINNED .or. gw_device(a) /= 0 .or. gw_owns(a) /= 0) call fail('kind/device/owns')
  if (gw_array_dtype(a) /= GW_FLOAT64 .or. gw_is_readonly(a) /= 0) call fail('dtype/readonly')
  a2 = gw_array_context(a)
  if (.not. c_associated(a2, ctx)) call fail('array context')
  if (gw_array_pending(a) /= 0) call fail('nothing pending')
  ! a view (0-based, as in C): x(2:5:3, 2:4) is start (1,1), shape (2,3), step (3,1)
  call want(gw_view(a, [1_c_int64_t, 1_c_int64_t], [2_c_int64_t, 3_c_int64_t], [3_c_int64_t, 1_c_int64_t], v), &
            GW_OK, 'view')
  call want(gw_view(a, [5_c_int64_t, 0_c_int64_t], [1_c_int64_t, 1_c_int64_t], out=v), GW_EINVAL, 'view out of bounds')
  msg = gw_last_error()
  if (len(msg) == 0) call fail('message of a view out of bounds')
  call want(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 2, [2_c_int64_t, 3_c_int64_t], b), GW_OK, 'alloc')
  call want(gw_copy(b, v), GW_OK, 'copy view -> device')
  call gw_release(v)
  ! y: the device array (C order 2x3) read back as 6 values, then through a reshape
  call want(gw_wrap_array(ctx, y, v), GW_OK, 'wrap y')
  call want(gw_reshape(b, 1, [6_c_int64_t], s), GW_OK, 'reshape')
  call gw_release(v)
  call want(gw_wrap_array(ctx, y(1:6), v), GW_OK, 'wrap y(1:6)')
  call want(gw_copy(v, s), GW_OK, 'copy reshape -> y')
  if (any(y(1:6) /= [x(2, 2), x(2, 3), x(2, 4), x(5, 2), x(5, 3), x(5, 4)])) call fail('view values')
  call want(gw_copy(v, a), GW_EINVAL, 'copy of mismatched shapes')
  call gw_release(s)
  call gw_release(v)
  ! retain / release
  ! (into a variable: gfortran 12 expands c_associated(f(), x) so that f runs twice)
  a2 = gw_retain(a)
  if (.not. c_associated(a2, a)) call fail('gw_retain')
  call gw_release(a)
  ! a read-only wrap refuses writes
  call want(gw_wrap_array(ctx, y, v, GW_WRAP_READONLY), GW_OK, 'read-only wrap')
  one = 1
  call want(gw_fill(v, c_loc(one)), GW_EREADONLY, 'fill of a read-only wrap')
  call gw_release(v)

  ! ---- streams ----------------------------------------------------------------------------
  call want(gw_stream_create(ctx, s), GW_OK, 'stream')
  call want(gw_fill_async_scalar(b, 3.5_real64, s), GW_OK, 'fill async')
  call want(gw_stream_wrap(ctx, gw_stream_native(s), s2), GW_OK, 'borrow a stream')
  call want(gw_array_wait(b, s2), GW_OK, 'array wait')
  call want(gw_wrap_array(ctx, y(1:6), v), GW_OK, 'wrap y(1:6)')
  call want(gw_reshape(b, 1, [6_c_int64_t], a2), GW_OK, 'reshape')
  call want(gw_copy_async(v, a2, s2), GW_OK, 'copy async')
  call want(gw_stream_synchronize(s2), GW_OK, 'stream synchronize')
  call gw_release(a2) ! after the stream ran: the arrays must outlive the work
  if (any(y(1:6) /= 3.5_real64)) call fail('async fill and copy')
  call want(gw_fill_async(v, c_loc(one), s), GW_OK, 'raw fill async')
  call want(gw_stream_synchronize(s), GW_OK, 'stream synchronize')
  if (gw_array_pending(v) /= 0 .or. any(y(1:6) /= 1)) call fail('raw fill async')
  call gw_stream_destroy(s2)
  call gw_stream_destroy(s)
  call want(gw_synchronize(ctx), GW_OK, 'synchronize')
  call gw_release(v)
  call gw_release(b)
  call gw_release(a)

  ! ---- pin, deleter ---------------------------------------------------------------------
  call want(gw_pin(ctx, c_loc(y), 160_c_size_t), GW_OK, 'pin')
  call want(gw_unpin(ctx, c_loc(y), 160_c_size_t), GW_OK, 'unpin')
  call want(gw_unpin(ctx, c_loc(y), 160_c_size_t), GW_ENOTREG, 'unpin twice')
  call want(gw_wrap_with_deleter(ctx, c_loc(y), GW_FLOAT64, 1, [20_c_int64_t], flags=0_c_int, &
            deleter=c_funloc(count_deleter), user=c_null_ptr, out=a), GW_OK, 'wrap with a deleter')
  call want(gw_view(a, [3_c_int64_t], [2_c_int64_t], out=v), GW_OK, 'view of it')
  call gw_release(a)
  if (deleted /= 0) call fail('deleter ran with a view alive')
  call gw_release(v)
  if (deleted /= 1) call fail('deleter did not run exactly once')

  ! a second context, destroyed while an array keeps it alive
  call want(gw_context_create(GW_BACKEND_CPU, 0_c_int, ctx2), GW_OK, 'second context')
  call want(gw_alloc(ctx2, GW_MEM_HOST, GW_FLOAT32, 0, out=a), GW_OK, '0-d alloc')
  call gw_context_destroy(ctx2)
  call c_f_pointer(gw_host_data(a), hp)
  call want(gw_fill_scalar(a, 2.0_real32), GW_OK, 'fill of a 0-d array')
  r = real(hp, real64)
  if (r /= 2) call fail('0-d fill')
  call gw_release(a)

  call gw_context_destroy(ctx)
  deallocate(x, y)
  if (allocated(msg)) deallocate(msg) ! main-program locals are never freed for us (LSan)
  if (gw_cpu_live_registrations() /= regs0) call fail('registrations left behind')
  if (gw_cpu_live_allocations() /= allocs0) call fail('allocations left behind')
  if (nfail > 0) then
    write (error_unit, '(i0,a)') nfail, ' failures'
    error stop 1
  end if
  write (*, '(a)') 'fortran.api: ok'

contains

  subroutine fail(what)
    character(len=*), intent(in) :: what
    write (error_unit, '(a,a)') 'FAIL ', what
    nfail = nfail + 1
  end subroutine

  subroutine want(got, expected, what)
    integer(c_int), intent(in) :: got, expected
    character(len=*), intent(in) :: what
    if (got == expected) return
    write (error_unit, '(a,a,a,a,a,a,a,a)') 'FAIL ', what, ': ', gw_err_name(got), ' (want ', &
      gw_err_name(expected), '): ', gw_last_error()
    nfail = nfail + 1
  end subroutine

end program test_api

