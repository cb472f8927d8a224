! Fortran module `gpuwrap_halo`: the MPI halo exchange of include/gpuwrap/halo.h.
!
! gw_halo_create(field, cart, width, path, out), gw_halo_create_multi(fields, nfields, cart,
! path, out), gw_grid_create(comm, ndims, global, periods, dims, out) and
! gw_grid_create_local(comm, ndims, local, periods, dims, out) are generic over the
! communicator: a Fortran `integer` handle (use mpi / mpif.h) or type(MPI_Comm) (use
! mpi_f08); the plan duplicates it, as in C. gw_grid_comm(g) returns the grid's communicator
! as type(MPI_Comm), gw_grid_comm_fint(g) as the integer handle. The other calls are the C
! ones (status integer(c_int), handles type(c_ptr)); gw_halo_last_error(),
! gw_halo_path_name() and the optional `why` of gw_halo_nccl_available() are Fortran strings
! (raw: *_c).
! Grid dims are the dims of gw_wrap_array arrays: gpuwrap dim d is Fortran dim d, so a
! field of a grid is allocated (local(1)+2*w(1), local(2)+2*w(2), ...). In gw_grid_create*
! `periods` and `dims` are arrays of ndims entries (no NULL: pass zeros for "none periodic"
! and "MPI_Dims_create chooses"); in gw_grid_gather `width` is optional (absent: NULL,
! inferred) and `global` is c_null_ptr on the ranks other than root.
! Library gpuwrap_fortran_halo (CMake gpuwrap::fortran_halo), built when MPI's Fortran
! bindings with mpi_f08 are found.
module gpuwrap_halo
  use, intrinsic :: iso_c_binding
  use gpuwrap_core, only: gw_c_string
  use mpi_f08, only: MPI_Comm
  implicit none
  private
  public :: gw_halo_create, gw_halo_update, gw_halo_start, gw_halo_finish, gw_halo_query, &
            gw_halo_update_on, gw_halo_start_on, gw_halo_finish_on, &
            gw_halo_destroy, gw_halo_last_error, gw_halo_last_error_c, gw_halo_path_name, &
            gw_halo_path_name_c, gw_halo_info, gw_halo_create_fint, &
            gw_halo_field, gw_halo_create_multi, gw_halo_create_multi_fint, &
            gw_halo_nccl_available, gw_halo_nccl_available_c
  public :: gw_grid_info, gw_grid_create, gw_grid_create_local, gw_grid_create_fint, &
            gw_grid_create_local_fint, gw_grid_destroy, gw_grid_comm, gw_grid_comm_fint, &
            gw_grid_query, gw_grid_block, gw_grid_context_create, gw_grid_gather
  public :: GW_HALO_PATH_AUTO, GW_HALO_PATH_HOST, GW_HALO_PATH_DEVICE, GW_HALO_PATH_NCCL, &
            GW_HALO_PATH_IPC, GW_HALO_INFO_C_SIZE, GW_GRID_INFO_C_SIZE

  include 'gpuwrap_halo_constants.inc'

  ! gw_halo_info, field by field as the C struct. struct_size starts as this layout's size
  ! (gpuwrap.h, Conventions), so a declared variable is ready for gw_halo_query.
  type, bind(c) :: gw_halo_info
    integer(c_size_t) :: struct_size = GW_HALO_INFO_C_SIZE
    integer(c_int) :: path = 0
    integer(c_int) :: gpu_aware = 0
    integer(c_int) :: neighbours = 0
    integer(c_size_t) :: bytes_sent = 0
    integer(c_size_t) :: bytes_local = 0
    integer(c_size_t) :: buffer_bytes = 0
    integer(c_int) :: shared_memory = 0
    integer(c_int) :: path_stream_ordered = 0 ! the stream-ordered calls' path (AUTO per mode)
  end type gw_halo_info

  ! gw_halo_field: one field of gw_halo_create_multi and its widths (gw_halo_field(f, [1,1,1])).
  type, bind(c) :: gw_halo_field
    type(c_ptr) :: field = c_null_ptr
    integer(c_int) :: width(3) = 0
  end type gw_halo_field

  ! gw_grid_info, field by field as the C struct (entries past ndims are 1 or 0).
  type, bind(c) :: gw_grid_info
    integer(c_size_t) :: struct_size = GW_GRID_INFO_C_SIZE
    integer(c_int) :: ndims = 0
    integer(c_int) :: dims(3) = 1
    integer(c_int) :: periods(3) = 0
    integer(c_int) :: coords(3) = 0
    integer(c_int) :: rank = 0, size = 0
    integer(c_int) :: node_rank = 0, node_size = 0
    integer(c_int64_t) :: global(3) = 1
    integer(c_int64_t) :: local(3) = 1
    integer(c_int64_t) :: offset(3) = 0
  end type gw_grid_info

  interface gw_halo_create
    module procedure halo_create_int, halo_create_f08
  end interface
  interface gw_halo_create_multi
    module procedure halo_create_multi_int, halo_create_multi_f08
  end interface
  interface gw_grid_create
    module procedure grid_create_int, grid_create_f08
  end interface
  interface gw_grid_create_local
    module procedure grid_create_local_int, grid_create_local_f08
  end interface

  interface
    ! The C shim (gpuwrap_halo_f.c): MPI_Comm_f2c(comm), then gw_halo_create.
    function gw_halo_create_fint(field, comm, width, path, out) bind(c, name="gw_halo_create_fint") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: field
      integer(c_int), value :: comm
      integer(c_int), intent(in) :: width(3)
      integer(c_int), value :: path
      type(c_ptr), intent(out) :: out
      integer(c_int) :: st
    end function
    ! The C shim: MPI_Comm_f2c(comm), then gw_halo_create_multi.
    function gw_halo_create_multi_fint(fields, nfields, comm, path, out) bind(c, name="gw_halo_create_multi_fint") &
        result(st)
      import :: c_int, c_ptr, gw_halo_field
      type(gw_halo_field), intent(in) :: fields(*)
      integer(c_int), value :: nfields, comm, path
      type(c_ptr), intent(out) :: out
      integer(c_int) :: st
    end function
    function gw_halo_nccl_available_c(why) bind(c, name="gw_halo_nccl_available") result(r)
      import :: c_int, c_ptr
      type(c_ptr), intent(inout) :: why ! not written when NCCL is available
      integer(c_int) :: r
    end function
    ! ---- grid helpers ------------------------------------------------------------------
    ! The C shims: MPI_Comm_f2c(comm), then gw_grid_create / gw_grid_create_local.
    function gw_grid_create_fint(comm, ndims, global, periods, dims, out) bind(c, name="gw_grid_create_fint") &
        result(st)
      import :: c_int, c_int64_t, c_ptr
      integer(c_int), value :: comm, ndims
      integer(c_int64_t), intent(in) :: global(*)
      integer(c_int), intent(in) :: periods(*), dims(*)
      type(c_ptr), intent(out) :: out
      integer(c_int) :: st
    end function
    function gw_grid_create_local_fint(comm, ndims, local, periods, dims, out) &
        bind(c, name="gw_grid_create_local_fint") result(st)
      import :: c_int, c_int64_t, c_ptr
      integer(c_int), value :: comm, ndims
      integer(c_int64_t), intent(in) :: local(*)
      integer(c_int), intent(in) :: periods(*), dims(*)
      type(c_ptr), intent(out) :: out
      integer(c_int) :: st
    end function
    ! The grid's communicator as a Fortran integer handle (MPI_Comm_c2f(gw_grid_comm(g))).
    function gw_grid_comm_fint(g) bind(c, name="gw_grid_comm_fint") result(comm)
      import :: c_int, c_ptr
      type(c_ptr), value :: g
      integer(c_int) :: comm
    end function
    subroutine gw_grid_destroy(g) bind(c, name="gw_grid_destroy")
      import :: c_ptr
      type(c_ptr), value :: g
    end subroutine
    function gw_grid_query(g, out) bind(c, name="gw_grid_query") result(st)
      import :: c_int, c_ptr, gw_grid_info
      type(c_ptr), value :: g
      type(gw_grid_info), intent(inout) :: out ! inout: the library reads out%struct_size
      integer(c_int) :: st
    end function
    ! r: a rank of gw_grid_comm(g) (0-based, as MPI's); offset 0-based, as in C.
    function gw_grid_block(g, r, local, offset) bind(c, name="gw_grid_block") result(st)
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: g
      integer(c_int), value :: r
      integer(c_int64_t), intent(out) :: local(3), offset(3)
      integer(c_int) :: st
    end function
    function gw_grid_context_create(g, backend, out) bind(c, name="gw_grid_context_create") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: g
      integer(c_int), value :: backend
      type(c_ptr), intent(out) :: out
      integer(c_int) :: st
    end function
    ! width absent: NULL (inferred from the field's shape); global: c_null_ptr off root.
    function gw_grid_gather(g, field, width, global, root) bind(c, name="gw_grid_gather") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: g, field
      integer(c_int), intent(in), optional :: width(*)
      type(c_ptr), value :: global
      integer(c_int), value :: root
      integer(c_int) :: st
    end function
    function gw_halo_update(h) bind(c, name="gw_halo_update") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: h
      integer(c_int) :: st
    end function
    function gw_halo_start(h) bind(c, name="gw_halo_start") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: h
      integer(c_int) :: st
    end function
    function gw_halo_finish(h) bind(c, name="gw_halo_finish") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: h
      integer(c_int) :: st
    end function
    ! ordered on a gpuwrap stream (halo.h: "Stream-ordered updates")
    function gw_halo_start_on(h, s) bind(c, name="gw_halo_start_on") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: h, s
      integer(c_int) :: st
    end function
    function gw_halo_finish_on(h, s) bind(c, name="gw_halo_finish_on") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: h, s
      integer(c_int) :: st
    end function
    function gw_halo_update_on(h, s) bind(c, name="gw_halo_update_on") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: h, s
      integer(c_int) :: st
    end function
    function gw_halo_query(h, out) bind(c, name="gw_halo_query") result(st)
      import :: c_int, c_ptr, gw_halo_info
      type(c_ptr), value :: h
      type(gw_halo_info), intent(inout) :: out ! inout: the library reads out%struct_size
      integer(c_int) :: st
    end function
    subroutine gw_halo_destroy(h) bind(c, name="gw_halo_destroy")
      import :: c_ptr
      type(c_ptr), value :: h
    end subroutine
    function gw_halo_path_name_c(p) bind(c, name="gw_halo_path_name") result(r)
      import :: c_int, c_ptr
      integer(c_int), value :: p
      type(c_ptr) :: r
    end function
    function gw_halo_last_error_c() bind(c, name="gw_halo_last_error") result(r)
      import :: c_ptr
      type(c_ptr) :: r
    end function
  end interface

contains

  function halo_create_int(field, cart, width, path, out) result(st)
    type(c_ptr), intent(in) :: field
    integer, intent(in) :: cart
    integer(c_int), intent(in) :: width(3), path
    type(c_ptr), intent(out) :: out
    integer(c_int) :: st
    st = gw_halo_create_fint(field, int(cart, c_int), width, path, out)
  end function

  function halo_create_f08(field, cart, width, path, out) result(st)
    type(c_ptr), intent(in) :: field
    type(MPI_Comm), intent(in) :: cart
    integer(c_int), intent(in) :: width(3), path
    type(c_ptr), intent(out) :: out
    integer(c_int) :: st
    st = gw_halo_create_fint(field, int(cart%MPI_VAL, c_int), width, path, out)
  end function

  function halo_create_multi_int(fields, nfields, cart, path, out) result(st)
    type(gw_halo_field), intent(in) :: fields(*)
    integer(c_int), intent(in) :: nfields, path
    integer, intent(in) :: cart
    type(c_ptr), intent(out) :: out
    integer(c_int) :: st
    st = gw_halo_create_multi_fint(fields, nfields, int(cart, c_int), path, out)
  end function

  function halo_create_multi_f08(fields, nfields, cart, path, out) result(st)
    type(gw_halo_field), intent(in) :: fields(*)
    integer(c_int), intent(in) :: nfields, path
    type(MPI_Comm), intent(in) :: cart
    type(c_ptr), intent(out) :: out
    integer(c_int) :: st
    st = gw_halo_create_multi_fint(fields, nfields, int(cart%MPI_VAL, c_int), path, out)
  end function

  function grid_create_int(comm, ndims, global, periods, dims, out) result(st)
    integer, intent(in) :: comm
    integer(c_int), intent(in) :: ndims, periods(*), dims(*)
    integer(c_int64_t), intent(in) :: global(*)
    type(c_ptr), intent(out) :: out
    integer(c_int) :: st
    st = gw_grid_create_fint(int(comm, c_int), ndims, global, periods, dims, out)
  end function

  function grid_create_f08(comm, ndims, global, periods, dims, out) result(st)
    type(MPI_Comm), intent(in) :: comm
    integer(c_int), intent(in) :: ndims, periods(*), dims(*)
    integer(c_int64_t), intent(in) :: global(*)
    type(c_ptr), intent(out) :: out
    integer(c_int) :: st
    st = gw_grid_create_fint(int(comm%MPI_VAL, c_int), ndims, global, periods, dims, out)
  end function

  function grid_create_local_int(comm, ndims, local, periods, dims, out) result(st)
    integer, intent(in) :: comm
    integer(c_int), intent(in) :: ndims, periods(*), dims(*)
    integer(c_int64_t), intent(in) :: local(*)
    type(c_ptr), intent(out) :: out
    integer(c_int) :: st
    st = gw_grid_create_local_fint(int(comm, c_int), ndims, local, periods, dims, out)
  end function

  function grid_create_local_f08(comm, ndims, local, periods, dims, out) result(st)
    type(MPI_Comm), intent(in) :: comm
    integer(c_int), intent(in) :: ndims, periods(*), dims(*)
    integer(c_int64_t), intent(in) :: local(*)
    type(c_ptr), intent(out) :: out
    integer(c_int) :: st
    st = gw_grid_create_local_fint(int(comm%MPI_VAL, c_int), ndims, local, periods, dims, out)
  end function

  !> The grid's Cartesian communicator (borrowed: valid until gw_grid_destroy).
  function gw_grid_comm(g) result(comm)
    type(c_ptr), intent(in) :: g
    type(MPI_Comm) :: comm
    comm%MPI_VAL = int(gw_grid_comm_fint(g))
  end function

  !> 1 if the NCCL path could load NCCL in this process, else 0 (why: the loader's message).
  function gw_halo_nccl_available(why) result(ok)
    character(len=:), allocatable, intent(out), optional :: why
    integer(c_int) :: ok
    type(c_ptr) :: w
    w = c_null_ptr
    ok = gw_halo_nccl_available_c(w)
    if (present(why)) why = gw_c_string(w)
  end function

  !> Detail of this thread's last gw_halo_* failure ("" if none).
  function gw_halo_last_error() result(s)
    character(len=:), allocatable :: s
    s = gw_c_string(gw_halo_last_error_c())
  end function

  function gw_halo_path_name(p) result(s)
    integer(c_int), intent(in) :: p
    character(len=:), allocatable :: s
    s = gw_c_string(gw_halo_path_name_c(p))
  end function

end module gpuwrap_halo
