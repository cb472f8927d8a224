! Fortran module `gpuwrap_halo`: the MPI halo exchange of include/gpuwrap/halo.h.
!
! gw_halo_create(field, cart, width, path, out) is generic over the communicator: a Fortran
! `integer` handle (use mpi / mpif.h) or type(MPI_Comm) (use mpi_f08); the plan duplicates
! it, as in C. The other calls are the C ones (status integer(c_int), handles type(c_ptr));
! gw_halo_last_error() and gw_halo_path_name() return Fortran strings (raw: *_c).
! Library gpuwrap_fortran_halo (CMake gpuwrap::fortran_halo), built when MPI's Fortran
! bindings with mpi_f08 are found.
module gpuwrap_halo
  use, intrinsic :: iso_c_binding
  use gpuwrap, only: gw_c_string
  use mpi_f08, only: MPI_Comm
  implicit none
  private
  public :: gw_halo_create, gw_halo_update, gw_halo_start, gw_halo_finish, gw_halo_query, &
            gw_halo_update_on, gw_halo_start_on, gw_halo_finish_on, &
            gw_halo_destroy, gw_halo_last_error, gw_halo_last_error_c, gw_halo_path_name, &
            gw_halo_path_name_c, gw_halo_info, gw_halo_create_fint
  public :: GW_HALO_PATH_AUTO, GW_HALO_PATH_HOST, GW_HALO_PATH_DEVICE, GW_HALO_INFO_C_SIZE

  include 'gpuwrap_halo_constants.inc'

  ! gw_halo_info, field by field as the C struct.
  type, bind(c) :: gw_halo_info
    integer(c_int) :: path = 0
    integer(c_int) :: gpu_aware = 0
    integer(c_int) :: neighbours = 0
    integer(c_size_t) :: bytes_sent = 0
    integer(c_size_t) :: bytes_local = 0
    integer(c_size_t) :: buffer_bytes = 0
  end type gw_halo_info

  interface gw_halo_create
    module procedure halo_create_int, halo_create_f08
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
      type(gw_halo_info), intent(out) :: out
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
