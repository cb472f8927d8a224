! fortran.wrap.vector_subscript: a vector-subscripted actual argument (a([1,3,5], :)) is a
! compiler temporary, not a section of `a`: wrapping it once returned GW_OK over the copy,
! a fill wrote nothing of `a`, and the copy was gone when the call returned. Built with
! GW_VECTOR_SUBSCRIPT this file must not compile (the ctest builds it and expects the
! compiler's refusal); built without, it is the positive control: the same rows as a
! strided section (a(1:5:2, :)) are the caller's memory, and a fill writes exactly those
! elements of `a` (random data elsewhere, every element checked).
program wrap_vector_subscript
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real64, error_unit
  use gpuwrap
  implicit none
  real(real64), target :: a(6, 4)
  real(real64) :: ref(6, 4)
  type(c_ptr) :: ctx, arr
  integer(c_int) :: st
  integer :: nbad

  call random_seed()
  call random_number(a)
  ref = a
  st = gw_context_create(GW_BACKEND_CPU, 0, ctx)
  if (st /= GW_OK) call die('context: '//gw_last_error())
#ifdef GW_VECTOR_SUBSCRIPT
  st = gw_wrap_array(ctx, a([1, 3, 5], :), arr)
#else
  st = gw_wrap_array(ctx, a(1:5:2, :), arr)
#endif
  if (st /= GW_OK) call die('wrap: '//gw_last_error())
  st = gw_fill_scalar(arr, -7.0_real64)
  if (st /= GW_OK) call die('fill: '//gw_last_error())
  call gw_release(arr)
  call gw_context_destroy(ctx)
  ref(1:5:2, :) = -7.0_real64
  nbad = count(a /= ref)
  if (nbad /= 0) then
    write (error_unit, '(a,i0,a)') 'FAIL ', nbad, ' elements of a differ from the reference'
    error stop 1
  end if
  write (*, '(a)') 'fortran.wrap.vector_subscript: ok'

contains

  subroutine die(what)
    character(len=*), intent(in) :: what
    write (error_unit, '(a,a)') 'FAIL ', what
    error stop 1
  end subroutine

end program wrap_vector_subscript
