! diffusion3d.f90: the Fortran twin of diffusion3d.c: explicit 3-D heat diffusion
! (7-point stencil, real64) on a global grid split over MPI ranks, with Fortran arrays
! wrapped by gpuwrap (gw_wrap_array) and the gpuwrap halo exchange (module gpuwrap_halo).
!
!   mpirun -np 4 ./diffusion3d_f -n 64 -s 100 --dump field.bin
!
! It computes exactly what diffusion3d.c computes for the same -n, -s, --periodic and
! --overlap: the same rank grid (MPI_Dims_create), initial condition, coefficient, boundary
! (Dirichlet: boundary halo cells stay 0; or periodic), the same expression per cell in the
! same order of operations (the parentheses below are the C evaluation order, and Fortran
! must respect parentheses; built with -ffp-contract=off as the C example is), so the
! fields are equal bit for bit (tests/fortran checks it on 1 and 2 ranks).
!
! The arrays are Fortran arrays u(0:m+1, 0:m+1, 0:m+1) (halo of one cell), indexed (x, y, z),
! wrapped as they are: column-major, so gpuwrap dim 0 is x, decomposed along Cartesian
! dim 0 exactly as the C example's dim 0 (its slowest index). The stencil runs on the host,
! on the Fortran arrays; on a GPU backend gw_wrap_array page-locks them and the halo copies
! run on the GPU. (The C example's --mem, --stencil and --check are not here: see the C
! one for device memory and the CUDA kernel.)
!
! --dump FILE: rank 0 writes the global interior, N(0)*N(1)*N(2) native-endian real64
! values in C order (the value of global cell (x, y, z) at ((x*N1 + y)*N2 + z)), where
! N = dims*n: the layout a C program indexing u[x][y][z] writes.
program diffusion3d_f
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real64, int64, error_unit, output_unit
  use mpi_f08
  use gpuwrap
  use gpuwrap_halo
  implicit none

  real(real64), parameter :: R = 0.125_real64 ! D*dt/h^2, stable below 1/6
  integer(int64) :: m, gn(3)
  integer :: steps, rank, nprocs, dims(3), coords(3), s, i, j, k, narg, lr, d, side
  integer(c_int) :: ndev, backend, path
  logical :: periodic, overlap, periods(3)
  character(len=256) :: arg, val
  character(len=64) :: why
  integer :: ios
  character(len=:), allocatable :: dump
  real(real64), allocatable, target :: u(:,:,:), v(:,:,:)
  type(c_ptr) :: ctx, au, av, hu, hv
  type(MPI_Comm) :: cart, node
  type(gw_halo_info) :: info
  real(real64) :: t_start, t_total, t_max
  integer :: lo(3), hi(3)

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)

  ! ---- options (the C example's names) --------------------------------------------------
  m = 64
  steps = 100
  periodic = .false.
  overlap = .false.
  path = GW_HALO_PATH_AUTO
  dump = ''
  narg = command_argument_count()
  why = ''
  i = 1
  do while (i <= narg)
    call get_command_argument(i, arg)
    val = ''
    if (i < narg) call get_command_argument(i + 1, val)
    select case (trim(arg))
    case ('-h', '--help')
      if (rank == 0) call usage(output_unit)
      call MPI_Finalize()
      stop
    case ('--periodic')
      periodic = .true.
    case ('--check', '--mem', '--stencil', '--shell-k', '--t1', '--halo-only', '--halo-bench', '--weak')
      why = 'an option of diffusion3d (C) only, not of this twin'
      val = ''
      goto 90
    case ('--overlap')
      overlap = .true.
    case ('-n', '-s', '--path', '--dump')
      if (i >= narg) then
        why = 'needs a value'
        val = ''
        goto 90
      end if
      select case (trim(arg))
      case ('-n')
        read (val, *, iostat=ios) m
        if (ios /= 0) why = 'not a whole number'
        if (ios == 0 .and. m < 3) why = 'must be at least 3'
      case ('-s')
        read (val, *, iostat=ios) steps
        if (ios /= 0) why = 'not a whole number'
        if (ios == 0 .and. steps < 0) why = 'must be 0 or more'
      case ('--path')
        select case (trim(val))
        case ('auto'); path = GW_HALO_PATH_AUTO
        case ('host'); path = GW_HALO_PATH_HOST
        case ('device'); path = GW_HALO_PATH_DEVICE
        case default; why = 'not one of auto, host, device'
        end select
      case default
        dump = trim(val)
      end select
      if (why /= '') goto 90
      i = i + 1
    case default
      why = 'unknown option'
      val = ''
      goto 90
    end select
    i = i + 1
  end do

  ! ---- context: AUTO (or GPUWRAP_BACKEND), one device per node-local rank -----------------
  call MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, node)
  call MPI_Comm_rank(node, lr)
  call MPI_Comm_free(node)
  call check(gw_context_create(GW_BACKEND_AUTO, 0, ctx), 'gw_context_create')
  backend = gw_context_backend(ctx)
  if (gw_backend_device_count(backend, ndev) == GW_OK .and. ndev > 1) then
    call gw_context_destroy(ctx)
    call check(gw_context_create(backend, int(mod(lr, ndev), c_int), ctx), 'gw_context_create')
  end if

  ! ---- the rank grid and the global grid, as in C ------------------------------------------
  dims = 0
  periods = periodic
  call MPI_Dims_create(nprocs, 3, dims)
  call MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, .false., cart)
  call MPI_Cart_coords(cart, rank, 3, coords)
  gn = dims * m

  ! ---- u and v: Fortran arrays with a halo of one, wrapped without copying -----------------
  allocate(u(0:m+1, 0:m+1, 0:m+1), v(0:m+1, 0:m+1, 0:m+1))
  u = 0 ! Dirichlet: boundary halo cells stay 0
  do k = 1, int(m)
    do j = 1, int(m)
      do i = 1, int(m)
        u(i, j, k) = initial(coords(1) * m + i - 1, coords(2) * m + j - 1, coords(3) * m + k - 1, gn)
      end do
    end do
  end do
  v = u
  call check(gw_wrap_array(ctx, u, au), 'gw_wrap_array(u)')
  call check(gw_wrap_array(ctx, v, av), 'gw_wrap_array(v)')
  call check(gw_halo_create(au, cart, [1_c_int, 1_c_int, 1_c_int], path, hu), 'gw_halo_create(u)')
  call check(gw_halo_create(av, cart, [1_c_int, 1_c_int, 1_c_int], path, hv), 'gw_halo_create(v)')
  call check(gw_halo_query(hu, info), 'gw_halo_query')

  ! ---- time steps: exchange u's halo, v = u + R*laplacian(u), swap ------------------------
  call MPI_Barrier(cart)
  t_start = MPI_Wtime()
  do s = 0, steps - 1
    if (overlap) then
      ! split-phase: the interior [2, m) while the halo is in flight, then the shell
      if (mod(s, 2) == 0) then
        call check(gw_halo_start(hu), 'gw_halo_start')
        call stencil(u, v, [2, 2, 2], [int(m) - 1, int(m) - 1, int(m) - 1])
        call check(gw_halo_finish(hu), 'gw_halo_finish')
      else
        call check(gw_halo_start(hv), 'gw_halo_start')
        call stencil(v, u, [2, 2, 2], [int(m) - 1, int(m) - 1, int(m) - 1])
        call check(gw_halo_finish(hv), 'gw_halo_finish')
      end if
      do d = 1, 3
        do side = 0, 1
          call shell_box(d, side, int(m), lo, hi)
          if (mod(s, 2) == 0) then
            call stencil(u, v, lo, hi)
          else
            call stencil(v, u, lo, hi)
          end if
        end do
      end do
    else if (mod(s, 2) == 0) then
      call check(gw_halo_update(hu), 'gw_halo_update')
      call stencil(u, v, [1, 1, 1], [int(m), int(m), int(m)])
    else
      call check(gw_halo_update(hv), 'gw_halo_update')
      call stencil(v, u, [1, 1, 1], [int(m), int(m), int(m)])
    end if
  end do
  if (backend /= GW_BACKEND_CPU) call check(gw_synchronize(ctx), 'gw_synchronize')
  t_total = MPI_Wtime() - t_start
  call MPI_Reduce(t_total, t_max, 1, MPI_DOUBLE_PRECISION, MPI_MAX, 0, cart)
  if (rank == 0) then
    write (output_unit, '(a,i0,a,2(i0," x "),i0,a,i0,a,2(i0," x "),i0,a,a,a,i0,a)') &
      'diffusion3d (Fortran): ', nprocs, ' ranks (', dims, '), local ', m, '^3, global ', gn, &
      ', ', trim(merge('periodic ', 'Dirichlet', periodic)), ', ', steps, ' steps'
    write (output_unit, '(a,a,a,a,a,f9.3,a)') '  backend ', gw_backend_name(backend), ', halo path ', &
      gw_halo_path_name(info%path), ', time/step ', 1e3_real64 * t_max / max(steps, 1), ' ms'
  end if

  if (len(dump) > 0) then
    if (mod(steps, 2) == 1) then
      call write_field(v)
    else
      call write_field(u)
    end if
  end if

  call gw_halo_destroy(hu)
  call gw_halo_destroy(hv)
  call gw_release(au) ! before u and v go: the wraps borrow their memory
  call gw_release(av)
  call gw_context_destroy(ctx)
  deallocate(u, v)
  call MPI_Comm_free(cart)
  call MPI_Finalize()
  stop

  ! a bad argument: which, and why (exit status 2, as diffusion3d's)
90 if (rank == 0) then
    if (val /= '') then
      write (error_unit, '(a)') 'diffusion3d_f: '//trim(arg)//" '"//trim(val)//"': "//trim(why)
    else
      write (error_unit, '(a)') 'diffusion3d_f: '//trim(arg)//': '//trim(why)
    end if
    write (error_unit, '(a)') "Run 'diffusion3d_f --help' for the usage."
  end if
  call MPI_Finalize()
  stop 2

contains

  subroutine usage(unit)
    integer, intent(in) :: unit
    write (unit, '(a)') 'usage: diffusion3d_f [-n N] [-s S] [--periodic] [--overlap] [--path auto|host|device]', &
      '                    [--dump FILE]', &
      '  these options mean what they mean to diffusion3d (C), with its defaults (-n 64 -s 100,', &
      '  Dirichlet); its other options (--check, --mem, --stencil, ...) are not here: the C', &
      '  example checks against a one-rank reference, this one is compared with it (--dump).', &
      '  --dump FILE: rank 0 writes the global interior as raw real64 in C order (x slowest)'
  end subroutine

  ! A failed call: the status, gpuwrap's detail and the halo's, then MPI_Abort (as in C).
  subroutine check(st, what)
    integer(c_int), intent(in) :: st
    character(len=*), intent(in) :: what
    if (st == GW_OK) return
    write (error_unit, '(a,i0,a,a,a,a,a,a,a,a)') '[rank ', rank, '] ', what, ' failed: ', gw_err_name(st), &
      ': ', gw_last_error(), ' / halo: ', gw_halo_last_error()
    call MPI_Abort(MPI_COMM_WORLD, 1)
  end subroutine

  ! initial() of diffusion3d.c, operation for operation.
  pure function initial(gx, gy, gz, n) result(r)
    integer(int64), intent(in) :: gx, gy, gz, n(3)
    real(real64) :: r, x, y, z
    x = ((real(gx, real64) + 0.5_real64) / real(n(1), real64)) - 0.5_real64
    y = ((real(gy, real64) + 0.5_real64) / real(n(2), real64)) - 0.5_real64
    z = ((real(gz, real64) + 0.5_real64) / real(n(3), real64)) - 0.5_real64
    r = exp((-40.0_real64) * (((x * x) + (y * y)) + (z * z))) + &
        0.25_real64 * real(mod(gx * 7 + gy * 3 + gz, 5_int64), real64)
  end function

  ! v = u + R*laplacian(u) on cells lo..hi (inclusive): diffusion3d.c's expression, with
  ! its C evaluation order written out as parentheses.
  subroutine stencil(a, b, lo, hi)
    real(real64), intent(in) :: a(0:, 0:, 0:)
    real(real64), intent(inout) :: b(0:, 0:, 0:)
    integer, intent(in) :: lo(3), hi(3)
    integer :: x, y, z
    do z = lo(3), hi(3)
      do y = lo(2), hi(2)
        do x = lo(1), hi(1)
          b(x, y, z) = a(x, y, z) + R * ((((a(x - 1, y, z) + a(x + 1, y, z)) + (a(x, y - 1, z) + a(x, y + 1, z))) &
                                          + (a(x, y, z - 1) + a(x, y, z + 1))) - 6.0_real64 * a(x, y, z))
        end do
      end do
    end do
  end subroutine

  ! shell_box() of diffusion3d.c: slab (d, side) of the cells [1, m] outside [2, m-1], as
  ! inclusive bounds (d is 1-based here).
  subroutine shell_box(d, side, m, lo, hi)
    integer, intent(in) :: d, side, m
    integer, intent(out) :: lo(3), hi(3)
    integer :: e
    do e = 1, 3
      if (e < d) then
        lo(e) = 2
        hi(e) = m - 1
      else
        lo(e) = 1
        hi(e) = m
      end if
    end do
    lo(d) = merge(m, 1, side == 1)
    hi(d) = lo(d)
  end subroutine

  ! Gather the interiors to rank 0 and write the global field in C order.
  subroutine write_field(f)
    real(real64), intent(in) :: f(0:, 0:, 0:)
    real(real64), allocatable :: mine(:), all(:), g(:,:,:)
    integer :: mm, rr, c(3), unit, x, y, z
    mm = int(m)**3
    mine = reshape(f(1:m, 1:m, 1:m), [mm])
    allocate(all(merge(mm * nprocs, 1, rank == 0)))
    call MPI_Gather(mine, mm, MPI_DOUBLE_PRECISION, all, mm, MPI_DOUBLE_PRECISION, 0, cart)
    if (rank /= 0) return
    ! g(z, y, x): Fortran's column-major order of (z, y, x) is C order of (x, y, z)
    allocate(g(0:gn(3) - 1, 0:gn(2) - 1, 0:gn(1) - 1))
    do rr = 0, nprocs - 1
      call MPI_Cart_coords(cart, rr, 3, c)
      do z = 0, int(m) - 1
        do y = 0, int(m) - 1
          do x = 0, int(m) - 1
            g(c(3) * m + z, c(2) * m + y, c(1) * m + x) = all(1 + rr * mm + x + int(m) * (y + int(m) * z))
          end do
        end do
      end do
    end do
    open (newunit=unit, file=dump, access='stream', form='unformatted', status='replace', action='write')
    write (unit) g
    close (unit)
  end subroutine

end program diffusion3d_f
