! fortran.grid: the grid helpers and a multi-field plan from Fortran. A periodic grid made
! from its global size (MPI_Dims_create chooses the ranks per dim; 13 cells along x do not
! split evenly over 2 ranks), its device context, two fields of different dtypes and
! widths (real64 width 1, int32 width 2 along x) wrapped with gw_wrap_array and exchanged
! by ONE plan: every cell, halo included, must then hold the value of the global cell it
! stands for; once with gw_halo_update (type(MPI_Comm) of gw_grid_comm), once stream-ordered
! (start_on/finish_on, the integer handle of gw_grid_comm_fint). A stencil over the halo
! (faces, an edge and a corner) is gathered to rank 0 with gw_grid_gather and compared,
! element by element, with the same stencil computed on the global box in Fortran; the
! int32 field is gathered too. Also gw_grid_block, gw_grid_create_local, the structs'
! layouts, GW_HALO_PATH_NCCL and _IPC, gw_halo_nccl_available and a gather error.
program test_grid
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int32, int64, real64, error_unit
  use mpi_f08
  use gpuwrap
  use gpuwrap_halo
  implicit none
  integer(c_int64_t), parameter :: gn(3) = [13_c_int64_t, 6_c_int64_t, 5_c_int64_t]
  type(c_ptr) :: g, g2, ctx, s, h, fu, fv, fw, fglob
  type(gw_grid_info) :: info, info2
  type(gw_halo_field) :: fields(2)
  integer(c_int64_t) :: lc(3), off(3), total
  integer :: rank, nprocs, nfail, i, j, k, l(3), r, pass
  real(real64), allocatable, target :: u(:,:,:), w(:,:,:), wg(:,:,:)
  integer(int32), allocatable, target :: v(:,:,:), vg(:,:,:)
  character(len=:), allocatable :: why
  integer(c_int) :: st, ok

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  nfail = 0

  call want(gw_grid_create(MPI_COMM_WORLD, 3, gn, [1, 1, 1], [0, 0, 0], g), GW_OK, 'grid_create')
  call want(gw_grid_query(g, info), GW_OK, 'grid_query')
  if (info%struct_size /= GW_GRID_INFO_C_SIZE) call fail('gw_grid_info struct_size')
  if (info%ndims /= 3 .or. product(info%dims) /= nprocs .or. info%size /= nprocs) call fail('grid dims')
  if (any(info%global /= gn) .or. any(info%periods /= 1)) call fail('grid global/periods')
  if (info%node_rank < 0 .or. info%node_rank >= info%node_size) call fail('grid node rank')
  ! the blocks tile the box: even split, the first global % dims coordinates one more
  total = 0
  do r = 0, nprocs - 1
    call want(gw_grid_block(g, r, lc, off), GW_OK, 'grid_block')
    total = total + product(lc)
    if (r == info%rank .and. (any(lc /= info%local) .or. any(off /= info%offset))) call fail('grid_block of my rank')
  end do
  if (total /= product(gn)) call fail('blocks do not tile the box')
  do i = 1, 3
    if (info%local(i) /= gn(i) / info%dims(i) + merge(1, 0, info%coords(i) < mod(gn(i), int(info%dims(i), c_int64_t)))) &
      call fail('even split')
  end do
  if (gw_grid_block(g, nprocs, lc, off) /= GW_EINVAL) call fail('grid_block of a rank out of range')
  if (c_sizeof(info) /= GW_GRID_INFO_C_SIZE) call fail('gw_grid_info layout')
  call want(gw_grid_context_create(g, GW_BACKEND_CPU, ctx), GW_OK, 'grid_context_create')
  call want(gw_stream_create(ctx, s), GW_OK, 'stream_create')

  l = int(info%local)
  allocate(u(0:l(1) + 1, 0:l(2) + 1, 0:l(3) + 1), w(0:l(1) + 1, 0:l(2) + 1, 0:l(3) + 1))
  allocate(v(-1:l(1) + 2, 0:l(2) + 1, 0:l(3) + 1))
  do pass = 1, 2
    u = -1.0_real64
    v = -1
    do k = 1, l(3)
      do j = 1, l(2)
        do i = 1, l(1)
          u(i, j, k) = ref_u(i, j, k)
          v(i, j, k) = ref_v(i, j, k)
        end do
      end do
    end do
    call want(gw_wrap_array(ctx, u, fu), GW_OK, 'wrap u')
    call want(gw_wrap_array(ctx, v, fv), GW_OK, 'wrap v')
    fields(1) = gw_halo_field(fu, [1, 1, 1])
    fields(2) = gw_halo_field(fv, [2, 1, 1])
    if (pass == 1) then
      call want(gw_halo_create_multi(fields, 2, gw_grid_comm(g), GW_HALO_PATH_HOST, h), GW_OK, 'create_multi (mpi_f08)')
      call want(gw_halo_update(h), GW_OK, 'update')
    else
      call want(gw_halo_create_multi(fields, 2, int(gw_grid_comm_fint(g)), GW_HALO_PATH_AUTO, h), GW_OK, &
                'create_multi (integer)')
      call want(gw_halo_start_on(h, s), GW_OK, 'start_on')
      call want(gw_halo_finish_on(h, s), GW_OK, 'finish_on')
      call want(gw_stream_synchronize(s), GW_OK, 'stream_synchronize')
    end if
    call gw_release(fu)
    call gw_release(fv)
    call gw_halo_destroy(h)
    do k = 0, l(3) + 1
      do j = 0, l(2) + 1
        do i = -1, l(1) + 2
          if (i >= 0 .and. i <= l(1) + 1) then
            if (u(i, j, k) /= ref_u(i, j, k)) call fail('u cell value')
          end if
          if (v(i, j, k) /= ref_v(i, j, k)) call fail('v cell value')
        end do
      end do
    end do
  end do
  ! update_on: a whole update ordered on s, after clearing u's halo
  u(0, :, :) = -1.0_real64
  call want(gw_wrap_array(ctx, u, fu), GW_OK, 'wrap u')
  call want(gw_halo_create_multi([gw_halo_field(fu, [1, 1, 1])], 1, gw_grid_comm(g), GW_HALO_PATH_AUTO, h), GW_OK, &
            'create_multi of one field')
  call gw_release(fu)
  call want(gw_halo_update_on(h, s), GW_OK, 'update_on')
  call want(gw_stream_synchronize(s), GW_OK, 'stream_synchronize')
  call gw_halo_destroy(h)
  do k = 0, l(3) + 1
    do j = 0, l(2) + 1
      if (u(0, j, k) /= ref_u(0, j, k)) call fail('update_on')
    end do
  end do

  ! a stencil over faces, an edge and a corner; gathered to rank 0
  w = -2.0_real64
  do k = 1, l(3)
    do j = 1, l(2)
      do i = 1, l(1)
        w(i, j, k) = u(i - 1, j, k) + u(i + 1, j, k) + u(i, j - 1, k) + u(i, j + 1, k) + u(i, j, k - 1) &
                     + u(i, j, k + 1) + 3.0_real64 * u(i + 1, j + 1, k + 1) &
                     + real(v(i - 2, j, k) + v(i + 2, j, k) + 5 * v(i, j - 1, k + 1), real64)
      end do
    end do
  end do
  call want(gw_wrap_array(ctx, w, fw), GW_OK, 'wrap w')
  call want(gw_wrap_array(ctx, v, fv), GW_OK, 'wrap v')
  fglob = c_null_ptr
  if (info%rank == 0) then
    allocate(wg(gn(1), gn(2), gn(3)), vg(gn(1), gn(2), gn(3)))
    wg = -3.0_real64
    vg = -3
    call want(gw_wrap_array(ctx, wg, fglob), GW_OK, 'wrap wg')
  end if
  call want(gw_grid_gather(g, fw, global=fglob, root=0), GW_OK, 'gather w (width inferred)')
  call gw_release(fglob)
  if (info%rank == 0) call want(gw_wrap_array(ctx, vg, fglob), GW_OK, 'wrap vg')
  call want(gw_grid_gather(g, fv, [2, 1, 1], fglob, 0), GW_OK, 'gather v')
  ! an error on every rank: widths that do not match the field's shape
  st = gw_grid_gather(g, fv, [1, 1, 1], fglob, 0)
  if (st /= GW_EINVAL .or. len(gw_halo_last_error()) == 0) call fail('gather with a wrong width')
  call gw_release(fglob)
  call gw_release(fw)
  call gw_release(fv)
  if (info%rank == 0) then
    do k = 0, int(gn(3)) - 1
      do j = 0, int(gn(2)) - 1
        do i = 0, int(gn(1)) - 1
          if (wg(i + 1, j + 1, k + 1) /= ref_w(i, j, k)) call fail('gathered stencil')
          if (vg(i + 1, j + 1, k + 1) /= gv(i, j, k)) call fail('gathered int32 field')
        end do
      end do
    end do
  end if

  ! from the local size, with the integer handle: global = dims * local
  call want(gw_grid_create_local(MPI_COMM_WORLD%MPI_VAL, 2, [4_c_int64_t, 3_c_int64_t], [0, 1], [0, 0], g2), GW_OK, &
            'grid_create_local')
  call want(gw_grid_query(g2, info2), GW_OK, 'grid_query (local)')
  if (info2%ndims /= 2 .or. any(info2%local(1:2) /= [4, 3]) .or. any(info2%global(1:2) /= info2%dims(1:2) * [4, 3]) &
      .or. any(info2%periods(1:2) /= [0, 1]) .or. info2%dims(3) /= 1 .or. info2%local(3) /= 1) call fail('grid (local)')
  call gw_grid_destroy(g2)
  if (gw_grid_create(MPI_COMM_WORLD, 4, gn, [0, 0, 0, 0], [0, 0, 0, 0], g2) /= GW_EINVAL) call fail('grid of 4 dims')

  if (gw_halo_path_name(GW_HALO_PATH_NCCL) /= 'nccl') call fail('GW_HALO_PATH_NCCL')
  if (gw_halo_path_name(GW_HALO_PATH_IPC) /= 'ipc') call fail('GW_HALO_PATH_IPC')
  ok = gw_halo_nccl_available(why)
  if (ok == 0 .and. len(why) == 0) call fail('gw_halo_nccl_available without a reason')
  if (ok /= 0 .and. ok /= 1) call fail('gw_halo_nccl_available')

  call gw_stream_destroy(s)
  call gw_context_destroy(ctx)
  call gw_grid_destroy(g)
  call gw_grid_destroy(c_null_ptr)
  call MPI_Allreduce(MPI_IN_PLACE, nfail, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call MPI_Finalize()
  if (nfail > 0) error stop 1
  if (rank == 0) write (*, '(a,i0,a)') 'fortran.grid: ok (', nprocs, ' ranks)'

contains

  ! The global reference values, of 0-based global indices (wrapped: the grid is periodic).
  real(real64) function gu(a, b, c)
    integer, intent(in) :: a, b, c
    integer :: x(3)
    x = int(modulo([integer(int64) :: a, b, c], gn))
    gu = real(x(1) + 100 * x(2) + 10000 * x(3), real64) + 0.5_real64
  end function
  integer(int32) function gv(a, b, c)
    integer, intent(in) :: a, b, c
    integer :: x(3)
    x = int(modulo([integer(int64) :: a, b, c], gn))
    gv = int(7 * x(1) + 31 * x(2) + 101 * x(3) + 1, int32)
  end function
  real(real64) function ref_w(a, b, c)
    integer, intent(in) :: a, b, c
    ref_w = gu(a - 1, b, c) + gu(a + 1, b, c) + gu(a, b - 1, c) + gu(a, b + 1, c) + gu(a, b, c - 1) + gu(a, b, c + 1) &
            + 3.0_real64 * gu(a + 1, b + 1, c + 1) + real(gv(a - 2, b, c) + gv(a + 2, b, c) + 5 * gv(a, b - 1, c + 1), real64)
  end function
  ! The values of local cell (i, j, k) (interior 1..local, halo outside) of this rank.
  real(real64) function ref_u(i, j, k)
    integer, intent(in) :: i, j, k
    ref_u = gu(int(info%offset(1)) + i - 1, int(info%offset(2)) + j - 1, int(info%offset(3)) + k - 1)
  end function
  integer(int32) function ref_v(i, j, k)
    integer, intent(in) :: i, j, k
    ref_v = gv(int(info%offset(1)) + i - 1, int(info%offset(2)) + j - 1, int(info%offset(3)) + k - 1)
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
end program test_grid
