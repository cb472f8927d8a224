! Wraps a Fortran array (a strided section), fills it through gpuwrap, checks the values.
program consumer_fortran
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real64
  use gpuwrap
  implicit none
  real(real64), allocatable, target :: a(:,:)
  type(c_ptr) :: ctx, arr
  integer(c_int) :: st, backend
  allocate(a(6, 4))
  a = 0
  st = gw_context_create(GW_BACKEND_AUTO, 0, ctx)
  if (st /= GW_OK) then
    print '(a,a,a,a)', 'gw_context_create: ', gw_err_name(st), ': ', gw_last_error()
    error stop 1
  end if
  st = gw_wrap_array(ctx, a(1::2, :), arr) ! every other row: strides (2, 6)
  if (st /= GW_OK) error stop 2
  st = gw_fill_scalar(arr, 2.5_real64)
  if (st /= GW_OK) error stop 3
  st = gw_synchronize(ctx)
  backend = gw_context_backend(ctx)
  call gw_release(arr)
  call gw_context_destroy(ctx)
  if (any(a(1::2, :) /= 2.5_real64) .or. any(a(2::2, :) /= 0)) error stop 4
  print '(a,a)', 'consumer_fortran: ok on ', gw_backend_name(backend)
end program consumer_fortran
