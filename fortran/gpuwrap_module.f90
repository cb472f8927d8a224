! Module `gpuwrap`, as `use gpuwrap` finds it in a build without the Fortran halo: the C
! API (module gpuwrap_core). With the halo, gpuwrap_module_halo.f90 is module gpuwrap
! instead: the same and module gpuwrap_halo's names (one gpuwrap.mod in either build).
module gpuwrap
  use gpuwrap_core
  implicit none
  public
end module gpuwrap
