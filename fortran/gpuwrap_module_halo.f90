! Module `gpuwrap` in a build with the Fortran halo: the C API (module gpuwrap_core) and the
! halo exchange with a Fortran communicator (module gpuwrap_halo), so `use gpuwrap` gives
! both, as DESIGN.md's Fortran face says; `use gpuwrap_halo` still works alone or beside it.
! It holds no procedures of its own: a program that calls nothing of the halo links
! gpuwrap_fortran only, and compiles without MPI's module files (gfortran's gpuwrap.mod
! carries what it uses).
module gpuwrap
  use gpuwrap_core
  use gpuwrap_halo
  implicit none
  public
end module gpuwrap
