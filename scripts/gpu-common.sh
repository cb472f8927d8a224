# Shared by the scripts that run on the GPU machine (scripts/h200.sh, scripts/gpu-py45.sh):
# source it from the repository root.
#   gw_gpu_build DIR LOGDIR  configure DIR for CUDA (sm_90, Release, no -Werror: the GPU
#                            machine's compilers are not CI's) unless it is configured
#                            already (a build directory given by the caller is reused as it
#                            is), then build it; logs LOGDIR/configure.txt and build.txt;
#                            status 1 when either fails
#   gw_gpu_pyenv DIR         export what python3 needs to import the source tree's package
#                            against DIR's library (the extension is compiled on first
#                            import into DIR/python-ext/, python/gpuwrap/_loader.py)
gw_gpu_build() {
  local dir=$1 logs=$2
  export PATH=/usr/local/cuda/bin:$PATH
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DGW_WERROR=OFF -DGW_CUDA=ON -DGW_HIP=OFF \
      -DCMAKE_CUDA_ARCHITECTURES=90 > "$logs/configure.txt" 2>&1 || return 1
  fi
  cmake --build "$dir" -j"$(nproc)" > "$logs/build.txt" 2>&1
}

gw_gpu_pyenv() {
  local lib
  lib=$(cd "$1" && pwd)/lib/libgpuwrap.so
  export GPUWRAP_LIB=$lib PYTHONPATH=$PWD/python
}
