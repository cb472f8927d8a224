! fortran.wrap: gw_wrap_array on Fortran arrays of rank 1..7 of every kind the generic
! takes, the whole array and random sections of it (steps 1, 2, 3, -1, -2, extent-1 and
! empty dims), fresh random data each run. For each: shape and strides as Fortran has
! them, the section copied out through a C-order device array and compared with Fortran
! own values (pack), new values copied in and a fill, each compared element by element
! (bytes) with the same operations done by Fortran on a reference copy. Then a scalar
! (rank 0), a POINTER actual, and nothing left registered (the CPU model counters).
module test_wrap_kinds
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int8, int16, int32, int64, real32, real64, error_unit
  use gpuwrap
  implicit none
contains

  subroutine expect(st, want, what, nfail)
    integer(c_int), intent(in) :: st, want
    character(len=*), intent(in) :: what
    integer, intent(inout) :: nfail
    if (st == want) return
    write (error_unit, '(a,a,a,a,a,a,a,a)') 'FAIL ', what, ': ', gw_err_name(st), ' (want ', gw_err_name(want), &
      '): ', gw_last_error()
    nfail = nfail + 1
  end subroutine

  integer(int64) function irand(lo, hi)
    integer(int64), intent(in) :: lo, hi
    real(real64) :: r
    call random_number(r)
    irand = lo + min(int(r * real(hi - lo + 1, real64), int64), hi - lo)
  end function

  ! A random shape and section of it: rep 1 is the whole array as a section (contiguous),
  ! reps 2-4 random steps and bounds; rep 4 makes the last dim empty.
  subroutine random_section(rk, rep, sh, lo, up, stp, ext)
    integer, intent(in) :: rk, rep
    integer(int64), intent(out) :: sh(7), lo(7), up(7), stp(7), ext(7)
    integer(int64), parameter :: steps(5) = [1, 2, 3, -1, -2]
    integer :: d
    sh = 1
    lo = 1
    up = 1
    stp = 1
    do d = 1, rk
      sh(d) = irand(1_int64, merge(5_int64, 3_int64, rk <= 4))
      if (rep == 1) then
        lo(d) = 1
        up(d) = sh(d)
        stp(d) = 1
        cycle
      end if
      stp(d) = steps(irand(1_int64, 5_int64))
      lo(d) = irand(1_int64, sh(d))
      if (stp(d) > 0) then
        up(d) = irand(lo(d), sh(d))
      else
        up(d) = irand(1_int64, lo(d))
      end if
      if (rep == 4 .and. d == rk) up(d) = lo(d) - stp(d)
    end do
    do d = 1, 7
      ext(d) = max(0_int64, (up(d) - lo(d)) / stp(d) + 1)
    end do
  end subroutine

#define T integer(int8)
#define RUN_KIND run_i8
#define CHECK_ONE check_one_i8
#define FILL_ONE fill_one_i8
#define FROM_RANDOM(a, b) int(a * 250 - 125, int8)
#include "wrap_kind.inc"
#undef T
#undef RUN_KIND
#undef CHECK_ONE
#undef FILL_ONE
#undef FROM_RANDOM

#define T integer(int16)
#define RUN_KIND run_i16
#define CHECK_ONE check_one_i16
#define FILL_ONE fill_one_i16
#define FROM_RANDOM(a, b) int(a * 60000 - 30000, int16)
#include "wrap_kind.inc"
#undef T
#undef RUN_KIND
#undef CHECK_ONE
#undef FILL_ONE
#undef FROM_RANDOM

#define T integer(int32)
#define RUN_KIND run_i32
#define CHECK_ONE check_one_i32
#define FILL_ONE fill_one_i32
#define FROM_RANDOM(a, b) int(a * 4.0e9_real64 - 2.0e9_real64, int32)
#include "wrap_kind.inc"
#undef T
#undef RUN_KIND
#undef CHECK_ONE
#undef FILL_ONE
#undef FROM_RANDOM

#define T integer(int64)
#define RUN_KIND run_i64
#define CHECK_ONE check_one_i64
#define FILL_ONE fill_one_i64
#define FROM_RANDOM(a, b) (int(a * 9.0e18_real64 - 4.5e18_real64, int64) + int(b * 1000, int64))
#include "wrap_kind.inc"
#undef T
#undef RUN_KIND
#undef CHECK_ONE
#undef FILL_ONE
#undef FROM_RANDOM

#define T real(real32)
#define RUN_KIND run_r32
#define CHECK_ONE check_one_r32
#define FILL_ONE fill_one_r32
#define FROM_RANDOM(a, b) real(a * 2 - 1, real32)
#include "wrap_kind.inc"
#undef T
#undef RUN_KIND
#undef CHECK_ONE
#undef FILL_ONE
#undef FROM_RANDOM

#define T real(real64)
#define RUN_KIND run_r64
#define CHECK_ONE check_one_r64
#define FILL_ONE fill_one_r64
#define FROM_RANDOM(a, b) ((a * 2 - 1) + b * 1.0e-9_real64)
#include "wrap_kind.inc"
#undef T
#undef RUN_KIND
#undef CHECK_ONE
#undef FILL_ONE
#undef FROM_RANDOM

#define T complex(real32)
#define RUN_KIND run_c64
#define CHECK_ONE check_one_c64
#define FILL_ONE fill_one_c64
#define FROM_RANDOM(a, b) cmplx(a, b - 0.5_real64, real32)
#include "wrap_kind.inc"
#undef T
#undef RUN_KIND
#undef CHECK_ONE
#undef FILL_ONE
#undef FROM_RANDOM

#define T complex(real64)
#define RUN_KIND run_c128
#define CHECK_ONE check_one_c128
#define FILL_ONE fill_one_c128
#define FROM_RANDOM(a, b) cmplx(a, b - 0.5_real64, real64)
#include "wrap_kind.inc"
#undef T
#undef RUN_KIND
#undef CHECK_ONE
#undef FILL_ONE
#undef FROM_RANDOM

#define T logical(c_bool)
#define RUN_KIND run_l8
#define CHECK_ONE check_one_l8
#define FILL_ONE fill_one_l8
#define FROM_RANDOM(a, b) logical(a > 0.5_real64, c_bool)
#include "wrap_kind.inc"
#undef T
#undef RUN_KIND
#undef CHECK_ONE
#undef FILL_ONE
#undef FROM_RANDOM

end module test_wrap_kinds

program test_wrap
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int8, int16, int32, int64, real32, real64, error_unit
  use gpuwrap
  use test_wrap_kinds
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
  type(c_ptr) :: ctx, a
  integer :: nfail
  integer, allocatable :: seed(:)
  integer(c_size_t) :: regs0, allocs0
  real(real64), target :: scalar
  real(real64), pointer :: pp(:,:)

  nfail = 0
  call random_seed() ! a fresh seed each run (printed, to replay a failure)
  call random_seed(size=nfail)
  allocate(seed(nfail))
  call random_seed(get=seed)
  write (*, '(a,*(i0,:,","))') 'seed ', seed
  nfail = 0
  regs0 = gw_cpu_live_registrations()
  allocs0 = gw_cpu_live_allocations()
  call expect(gw_context_create(GW_BACKEND_CPU, 0, ctx), GW_OK, 'context', nfail)

  call run_i8(ctx, nfail)
  call run_i16(ctx, nfail)
  call run_i32(ctx, nfail)
  call run_i64(ctx, nfail)
  call run_r32(ctx, nfail)
  call run_r64(ctx, nfail)
  call run_c64(ctx, nfail)
  call run_c128(ctx, nfail)
  call run_l8(ctx, nfail)

  ! rank 0: a scalar is a 0-d array of one element
  scalar = 1.5_real64
  call expect(gw_wrap_array(ctx, scalar, a), GW_OK, 'wrap of a scalar', nfail)
  if (gw_ndim(a) /= 0 .or. gw_numel(a) /= 1) call fail('scalar: ndim/numel')
  call expect(gw_fill_scalar(a, -2.25_real64), GW_OK, 'fill of a scalar', nfail)
  if (scalar /= -2.25_real64) call fail('scalar: fill')
  call gw_release(a)
  ! a POINTER actual (a strided view of an allocation)
  allocate(pp(6, 5))
  pp = 0
  call expect(gw_wrap_array(ctx, pp(2:6:2, 5:1:-2), a, GW_WRAP_READONLY), GW_OK, 'wrap of a pointer section', nfail)
  if (any(gw_array_strides(a) /= [2_int64, -12_int64])) call fail('pointer section strides')
  if (gw_is_readonly(a) /= 1) call fail('GW_WRAP_READONLY flag')
  call expect(gw_fill_scalar(a, 1.0_real64), GW_EREADONLY, 'fill of a read-only wrap', nfail)
  call gw_release(a)
  deallocate(pp)

  call gw_context_destroy(ctx)
  if (gw_cpu_live_registrations() /= regs0) call fail('registrations left behind')
  if (gw_cpu_live_allocations() /= allocs0) call fail('allocations left behind')
  if (nfail > 0) then
    write (error_unit, '(i0,a)') nfail, ' failures'
    error stop 1
  end if
  deallocate(seed) ! main-program locals are never freed for us (LSan)
  write (*, '(a)') 'fortran.wrap: ok'

contains

  subroutine fail(what)
    character(len=*), intent(in) :: what
    write (error_unit, '(a,a)') 'FAIL ', what
    nfail = nfail + 1
  end subroutine

end program test_wrap
