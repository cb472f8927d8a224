! grid_halo.f90: the grid helpers of gpuwrap_halo from Fortran (ImplicitGlobalGrid's
! init_global_grid, update_halo!(A, B) and gather!): 2-D periodic diffusion of two
! quantities on a global box of nx x ny cells split over the MPI ranks.
!
!   mpirun -np 4 ./grid_halo_f [nx ny steps]      (default 64 48 50; --help: this usage)
!
! gw_grid_create splits the box (MPI_Dims_create picks the ranks per dim), gives this rank's
! block (gw_grid_query: local, offset) and its device (gw_grid_context_create); the two
! fields, Fortran arrays with a halo of one cell, are exchanged by ONE plan
! (gw_halo_create_multi: one message per neighbour and dim for both); gw_grid_gather
! assembles the global field on rank 0, which checks that the total is conserved.
program grid_halo_f
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real64, error_unit
  use mpi_f08
  use gpuwrap
  use gpuwrap_halo
  implicit none
  real(real64), parameter :: R = 0.2_real64 ! D*dt/h^2, stable below 1/4
  integer :: nx = 64, ny = 48, steps = 50, s, i, j, l(2), rank
  character(len=32) :: arg
  type(c_ptr) :: g, ctx, fa, fb, h, fglob
  type(gw_grid_info) :: info
  real(real64), allocatable, target :: a(:,:), b(:,:), an(:,:), bn(:,:), glob(:,:)
  real(real64) :: total0(2), total(2)

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  if (command_argument_count() > 0) then
    call get_command_argument(1, arg)
    if (arg == '-h' .or. arg == '--help') then
      if (rank == 0) write (*, '(a)') 'usage: grid_halo_f [nx ny steps]   (default 64 48 50)', &
        '  2-D periodic diffusion of two fields on a global nx x ny box split over the MPI ranks;', &
        '  checks that both totals are conserved'
      call MPI_Finalize()
      stop
    end if
    if (command_argument_count() /= 3) call bad_usage('give all three of nx ny steps, or none')
    call get_command_argument(1, arg); read (arg, *, iostat=s) nx
    if (s /= 0 .or. nx < 3) call bad_usage("nx '"//trim(arg)//"': a whole number >= 3")
    call get_command_argument(2, arg); read (arg, *, iostat=s) ny
    if (s /= 0 .or. ny < 3) call bad_usage("ny '"//trim(arg)//"': a whole number >= 3")
    call get_command_argument(3, arg); read (arg, *, iostat=s) steps
    if (s /= 0 .or. steps < 0) call bad_usage("steps '"//trim(arg)//"': a whole number >= 0")
  end if
  call check(gw_grid_create(MPI_COMM_WORLD, 2, [int(nx, c_int64_t), int(ny, c_int64_t)], [1, 1], [0, 0], g), 'grid')
  call check(gw_grid_query(g, info), 'grid query')
  call check(gw_grid_context_create(g, GW_BACKEND_AUTO, ctx), 'context')
  rank = info%rank
  l = int(info%local(1:2))
  allocate(a(0:l(1) + 1, 0:l(2) + 1), b(0:l(1) + 1, 0:l(2) + 1))
  allocate(an(0:l(1) + 1, 0:l(2) + 1), bn(0:l(1) + 1, 0:l(2) + 1))
  ! a: a hot square in the box's first quarter; b: a smooth wave (global indices)
  do j = 1, l(2)
    do i = 1, l(1)
      a(i, j) = merge(1.0_real64, 0.0_real64, info%offset(1) + i <= nx / 4 .and. info%offset(2) + j <= ny / 4)
      b(i, j) = sin(6.283185307179586_real64 * real(info%offset(1) + i - 1, real64) / nx)**2
    end do
  end do
  call check(gw_wrap_array(ctx, a, fa), 'wrap a')
  call check(gw_wrap_array(ctx, b, fb), 'wrap b')
  call check(gw_halo_create_multi([gw_halo_field(fa, [1, 1, 0]), gw_halo_field(fb, [1, 1, 0])], 2, &
                                  gw_grid_comm(g), GW_HALO_PATH_AUTO, h), 'plan')
  total0 = [sum(a(1:l(1), 1:l(2))), sum(b(1:l(1), 1:l(2)))]
  call MPI_Allreduce(MPI_IN_PLACE, total0, 2, MPI_DOUBLE_PRECISION, MPI_SUM, gw_grid_comm(g))

  do s = 1, steps
    call check(gw_halo_update(h), 'update') ! both fields, one message per neighbour and dim
    do j = 1, l(2)
      do i = 1, l(1)
        an(i, j) = a(i, j) + R * (a(i - 1, j) + a(i + 1, j) + a(i, j - 1) + a(i, j + 1) - 4 * a(i, j))
        bn(i, j) = b(i, j) + R * (b(i - 1, j) + b(i + 1, j) + b(i, j - 1) + b(i, j + 1) - 4 * b(i, j))
      end do
    end do
    a(1:l(1), 1:l(2)) = an(1:l(1), 1:l(2)) ! the plan holds a and b: update them in place
    b(1:l(1), 1:l(2)) = bn(1:l(1), 1:l(2))
  end do

  ! gather both to rank 0 (the halo width is inferred from the shapes)
  fglob = c_null_ptr
  allocate(glob(merge(nx, 1, rank == 0), merge(ny, 1, rank == 0))) ! used on rank 0 only
  if (rank == 0) call check(gw_wrap_array(ctx, glob, fglob), 'wrap glob')
  call check(gw_grid_gather(g, fa, global=fglob, root=0), 'gather a')
  if (rank == 0) total(1) = sum(glob)
  call check(gw_grid_gather(g, fb, global=fglob, root=0), 'gather b')
  if (rank == 0) total(2) = sum(glob)
  if (rank == 0) then
    write (*, '(a,i0,a,i0,a,i0,a,i0,a,i0,a)') 'grid_halo: ', nx, ' x ', ny, ' cells on ', info%dims(1), ' x ', &
      info%dims(2), ' ranks, ', steps, ' steps'
    write (*, '(a,2es24.16)') '  totals before ', total0
    write (*, '(a,2es24.16)') '  totals after  ', total
    if (any(abs(total - total0) > 1.0e-9_real64 * max(1.0_real64, abs(total0)))) then
      write (error_unit, '(a)') 'grid_halo: the totals were not conserved'
      error stop 1
    end if
  end if

  call gw_release(fglob)
  call gw_halo_destroy(h)
  call gw_release(fa)
  call gw_release(fb)
  call gw_context_destroy(ctx)
  call gw_grid_destroy(g)
  call MPI_Finalize()

contains

  ! A bad argument: which and why, then exit status 2.
  subroutine bad_usage(why)
    character(len=*), intent(in) :: why
    integer :: r
    call MPI_Comm_rank(MPI_COMM_WORLD, r)
    if (r == 0) write (error_unit, '(a)') 'grid_halo_f: '//why, 'usage: grid_halo_f [nx ny steps]   (--help)'
    call MPI_Finalize()
    stop 2
  end subroutine

  subroutine check(st, what)
    integer(c_int), intent(in) :: st
    character(len=*), intent(in) :: what
    if (st == GW_OK) return
    write (error_unit, '(a,a,a,a,a,a)') 'grid_halo: ', what, ': ', gw_err_name(st), ': ', gw_halo_last_error()
    call MPI_Abort(MPI_COMM_WORLD, 1)
  end subroutine
end program grid_halo_f
