! fortran.halo: the halo exchange from Fortran with both communicator kinds (an `integer`
! handle and type(MPI_Comm)), on a strided section of a Fortran array (every other x),
! periodic in all dims, so after an update every cell, halo included, holds the value of
! the global cell it stands for; every cell is checked, and the cells between the section's
! elements must be left alone. Also split-phase, gw_halo_query and an error's message.
! `use gpuwrap` alone gives the halo's names (DESIGN.md's Fortran face); test_grid.f90 also
! uses gpuwrap_halo beside it.
program test_halo
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64, real64, error_unit
  use mpi_f08
  use gpuwrap
  implicit none
  integer, parameter :: n(3) = [6, 5, 4] ! local extents, halo of one included
  integer :: rank, nprocs, dims(3), coords(3), nfail, kind_, i, j, k
  type(MPI_Comm) :: cart
  type(c_ptr) :: ctx, field, h
  type(gw_halo_info) :: info
  real(real64), allocatable, target :: big(:,:,:)
  real(real64) :: base, noise
  integer(c_int) :: st

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  nfail = 0
  call random_seed()
  call random_number(base) ! fresh values each run, the same on every rank
  base = real(int(base * 1.0e6_real64), real64)
  call MPI_Bcast(base, 1, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD)
  dims = 0
  call MPI_Dims_create(nprocs, 3, dims)
  call MPI_Cart_create(MPI_COMM_WORLD, 3, dims, [.true., .true., .true.], .false., cart)
  call MPI_Cart_coords(cart, rank, 3, coords)
  call want(gw_context_create(GW_BACKEND_CPU, 0, ctx), GW_OK, 'context')

  allocate(big(2 * n(1), n(2), n(3)))
  do kind_ = 1, 3
    call random_number(noise)
    big = -noise
    do k = 2, n(3) - 1
      do j = 2, n(2) - 1
        do i = 2, n(1) - 1
          big(2 * i - 1, j, k) = expected(i, j, k)
        end do
      end do
    end do
    call want(gw_wrap_array(ctx, big(1::2, :, :), field), GW_OK, 'wrap of the section')
    select case (kind_)
    case (1) ! an integer handle, as `use mpi` programs have
      call want(gw_halo_create(field, cart%MPI_VAL, [1, 1, 1], GW_HALO_PATH_AUTO, h), GW_OK, 'create (integer)')
    case default ! type(MPI_Comm)
      call want(gw_halo_create(field, cart, [1, 1, 1], GW_HALO_PATH_HOST, h), GW_OK, 'create (mpi_f08)')
    end select
    call gw_release(field) ! the plan holds its own reference
    if (kind_ == 3) then
      call want(gw_halo_start(h), GW_OK, 'start')
      call want(gw_halo_finish(h), GW_OK, 'finish')
    else
      call want(gw_halo_update(h), GW_OK, 'update')
    end if
    call want(gw_halo_query(h, info), GW_OK, 'query')
    if (info%path /= GW_HALO_PATH_HOST .or. info%bytes_sent + info%bytes_local == 0) call fail('query')
    call gw_halo_destroy(h)
    do k = 1, n(3)
      do j = 1, n(2)
        do i = 1, n(1)
          if (big(2 * i - 1, j, k) /= expected(i, j, k)) call fail('cell value')
          if (big(2 * i, j, k) /= -noise) call fail('a cell between the section elements was written')
        end do
      end do
    end do
  end do
  if (c_sizeof(info) /= GW_HALO_INFO_C_SIZE) call fail('gw_halo_info layout')

  ! an error: MPI_COMM_WORLD is no Cartesian communicator
  call want(gw_wrap_array(ctx, big(1::2, :, :), field), GW_OK, 'wrap of the section')
  st = gw_halo_create(field, MPI_COMM_WORLD, [1, 1, 1], GW_HALO_PATH_AUTO, h)
  if (st /= GW_EINVAL .or. len(gw_halo_last_error()) == 0) call fail('error of a non-Cartesian communicator')
  if (gw_halo_path_name(GW_HALO_PATH_DEVICE) /= 'device') call fail('gw_halo_path_name')
  call gw_release(field)

  call gw_context_destroy(ctx)
  call MPI_Comm_free(cart)
  call MPI_Allreduce(MPI_IN_PLACE, nfail, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call MPI_Finalize()
  if (nfail > 0) error stop 1
  if (rank == 0) write (*, '(a,i0,a)') 'fortran.halo: ok (', nprocs, ' ranks)'

contains

  ! The value of the global cell local cell (i, j, k) (1-based, halo at 1 and n) stands for.
  real(real64) function expected(i, j, k)
    integer, intent(in) :: i, j, k
    integer(int64) :: g(3), gn(3)
    gn = dims * (n - 2)
    g = modulo(int(coords, int64) * (n - 2) + [i, j, k] - 2, gn)
    expected = base + real(g(1) + 1000 * g(2) + 1000000 * g(3), real64)
  end function

  subroutine fail(what)
    character(len=*), intent(in) :: what
    if (nfail < 10) write (error_unit, '(a,i0,a,a)') '[rank ', rank, '] FAIL ', what
    nfail = nfail + 1
  end subroutine

  subroutine want(got, wanted, what)
    integer(c_int), intent(in) :: got, wanted
    character(len=*), intent(in) :: what
    if (got == wanted) return
    write (error_unit, '(a,i0,a,a,a,a,a,a,a,a)') '[rank ', rank, '] FAIL ', what, ': ', gw_err_name(got), ': ', &
      gw_last_error(), ' / ', gw_halo_last_error()
    nfail = nfail + 1
  end subroutine
end program test_halo
