! The halo from Fortran (mpi_f08): a periodic exchange on 1 or more ranks; every halo
! cell must hold its neighbour's value afterwards. `use gpuwrap` alone: it has the halo's
! names in an install with the Fortran halo.
program consumer_fortran_halo
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real64
  use mpi_f08
  use gpuwrap
  implicit none
  real(real64), allocatable, target :: u(:,:,:)
  type(c_ptr) :: ctx, arr, h
  type(MPI_Comm) :: cart
  integer :: rank, nprocs, dims(3), bad
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  dims = 0
  call MPI_Dims_create(nprocs, 3, dims)
  call MPI_Cart_create(MPI_COMM_WORLD, 3, dims, [.true., .true., .true.], .false., cart)
  allocate(u(5, 5, 5))
  u = -1
  u(2:4, 2:4, 2:4) = real(rank, real64)
  if (gw_context_create(GW_BACKEND_CPU, 0, ctx) /= GW_OK) error stop 1
  if (gw_wrap_array(ctx, u, arr) /= GW_OK) error stop 2
  if (gw_halo_create(arr, cart, [1, 1, 1], GW_HALO_PATH_AUTO, h) /= GW_OK) then
    print '(a)', gw_halo_last_error()
    error stop 3
  end if
  if (gw_halo_update(h) /= GW_OK) error stop 4
  call gw_halo_destroy(h)
  call gw_release(arr)
  call gw_context_destroy(ctx)
  bad = count(u < 0)
  call MPI_Allreduce(MPI_IN_PLACE, bad, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call MPI_Comm_free(cart)
  call MPI_Finalize()
  if (bad /= 0) error stop 5
  if (rank == 0) print '(a,i0,a)', 'consumer_fortran_halo: ok (', nprocs, ' ranks)'
end program consumer_fortran_halo
