! fortran.ipc: gw_ipc_export / gw_ipc_open from Fortran: type(gw_ipc_handle) is the C
! handle's 256 bytes; a device array's strided view exported and opened in the exporting
! process (the same memory, every element checked on fresh random data); a damaged handle
! is GW_EINVAL with the handle's reason; host memory GW_ENOTSUP, the handle untouched; the
! handle over a Unix socket pair (gw_ipc_handle_send / gw_ipc_handle_recv) arrives whole and
! opens the same memory; a receive from a closed peer is GW_EBACKEND.
program test_ipc
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real64, error_unit
  use gpuwrap
  implicit none
  integer :: nfail
  integer(c_int) :: st
  type(c_ptr) :: ctx, d, v, o, h, back
  type(gw_ipc_handle) :: hnd, bad, keep, got
  integer(c_int) :: sv(2)
  ! (libc, Linux's constants: AF_UNIX 1, SOCK_STREAM 1)
  interface
    function c_socketpair(domain, kind, protocol, fds) bind(c, name="socketpair") result(r)
      import :: c_int
      integer(c_int), value :: domain, kind, protocol
      integer(c_int), intent(out) :: fds(2)
      integer(c_int) :: r
    end function
    function c_close(fd) bind(c, name="close") result(r)
      import :: c_int
      integer(c_int), value :: fd
      integer(c_int) :: r
    end function
  end interface
  real(real64), allocatable, target :: x(:), y(:)
  integer(c_int64_t) :: n(1), start(1), vshape(1), step(1)

  nfail = 0
  call check(c_sizeof(hnd) == 256_c_size_t, 'c_sizeof(gw_ipc_handle) is 256')
  call check(gw_context_create(GW_BACKEND_CPU, 0, ctx) == GW_OK, 'context')
  allocate(x(101), y(20))
  call random_number(x)
  n = 101
  call check(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 1, n, d) == GW_OK, 'gw_alloc device')
  call check(gw_wrap_array(ctx, x, h) == GW_OK, 'wrap x')
  call check(gw_copy(d, h) == GW_OK, 'copy x to the device')
  start = 4
  vshape = 20
  step = 5
  call check(gw_view(d, start, vshape, step, v) == GW_OK, 'view')
  call check(gw_ipc_export(v, hnd) == GW_OK, 'export the view')
  call check(all(hnd%bytes(1:4) == [71_c_int8_t, 87_c_int8_t, 73_c_int8_t, 80_c_int8_t]), 'magic GWIP')
  call check(gw_ipc_open(ctx, hnd, o) == GW_OK, 'open in the exporting process')
  call check(c_associated(gw_data(o), gw_data(v)), 'the same memory')
  y = -1
  call check(gw_wrap_array(ctx, y, back) == GW_OK, 'wrap y')
  call check(gw_copy(back, o) == GW_OK, 'copy the opened array back')
  call check(all(y == x(5:100:5)), 'every element of the view')
  call check(c_socketpair(1_c_int, 1_c_int, 0_c_int, sv) == 0, 'socketpair')
  call check(gw_ipc_handle_send(sv(1), hnd) == GW_OK, 'gw_ipc_handle_send')
  call check(gw_ipc_handle_recv(sv(2), got) == GW_OK, 'gw_ipc_handle_recv')
  call check(all(got%bytes == hnd%bytes), 'the handle arrives whole')
  call gw_release(o)
  call check(gw_ipc_open(ctx, got, o) == GW_OK, 'open the received handle')
  call check(c_associated(gw_data(o), gw_data(v)), 'the same memory, received')
  call check(c_close(sv(1)) == 0, 'close the sending end')
  keep = got
  call check(gw_ipc_handle_recv(sv(2), got) == GW_EBACKEND, 'a closed peer: GW_EBACKEND')
  call check(all(got%bytes == keep%bytes), 'the handle untouched by the failed receive')
  call check(c_close(sv(2)) == 0, 'close the receiving end')
  bad = hnd
  bad%bytes(200) = int(ieor(int(bad%bytes(200)), 1), c_int8_t)
  st = gw_ipc_open(ctx, bad, v)
  call check(st == GW_EINVAL, 'a damaged handle: GW_EINVAL')
  call check(index(gw_last_error(), 'check value') > 0, 'the reason: '//gw_last_error())
  keep = hnd
  call check(gw_ipc_export(h, hnd) == GW_ENOTSUP, 'host memory: GW_ENOTSUP')
  call check(all(hnd%bytes == keep%bytes), 'the handle untouched')
  call gw_release(back)
  call gw_release(o)
  call gw_release(v)
  call gw_release(h)
  call gw_release(d)
  call gw_context_destroy(ctx)
  deallocate(x, y) ! a main program's allocatables are never freed for it (LSan)
  if (nfail > 0) then
    write (error_unit, '(i0,a)') nfail, ' checks failed'
    error stop 1
  end if
  print '(a)', 'fortran.ipc: ok'
contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      write (error_unit, '(2a)') 'FAIL ', what
      nfail = nfail + 1
    end if
  end subroutine
end program test_ipc
