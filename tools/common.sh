# What tools/test and tools/main-job share: the Debian packages TensorTree needs, installing the
# missing ones, and configuring a build directory. Sourced, not run; the caller defines log and die.

readonly JOBS=2
readonly CUDA_HOME_DIR=/usr/local/cuda
# What build/ and the main job need (cmake finds some of the dependencies for Meson).
readonly MAIN_PACKAGES=(
  meson ninja-build pkg-config g++ catch2 libboost-serialization-dev libopenmpi-dev openmpi-bin
  libxxhash-dev libdlpack-dev libtbb-dev nlohmann-json3-dev libcli11-dev libfmt-dev cmake libucx-dev libzmq3-dev
  cppzmq-dev
)
# The Python module and its learner: pybind11 with Debian's Python, NumPy, PyTorch and pytest. The
# main job installs them only with --python.
readonly PYTHON_PACKAGES=(pybind11-dev python3-dev python3-numpy python3-pytest python3-torch)
# What only the whole suite needs: libtorch for the bridge's tests and example (hundreds of
# packages, which the main job never uses), and the Python packages.
readonly TEST_PACKAGES=(libtorch-dev "${PYTHON_PACKAGES[@]}")
# The options of build/, the directory both scripts build: everything this machine has.
readonly MAIN_BUILD_OPTIONS=(-Dbuildtype=release -Db_sanitize=none -Dcuda=auto -Dnccl=auto -Dmpi=auto
  -Dpkgconfig.relocatable=true)

as_root() {
  if ((EUID == 0)); then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo "$@"
  else
    die "need root to run '$*', and sudo is not installed"
  fi
}

missing_packages() {  # package...
  local package
  for package in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
      printf '%s\n' "$package"
    fi
  done
}

install_missing_packages() {  # package...
  command -v dpkg-query >/dev/null || die "this script installs its tools with apt-get: it needs Debian 12"
  local -a missing
  mapfile -t missing < <(missing_packages "$@")
  if ((${#missing[@]} == 0)); then
    log "Debian packages: all $# present"
    return
  fi
  log "Debian packages: installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# nvcc is not on Debian's PATH; Meson looks for it there when deciding whether CUDA is available.
add_cuda_to_path() {
  if [[ -d $CUDA_HOME_DIR/bin ]]; then
    PATH=$CUDA_HOME_DIR/bin:$PATH
    export PATH
  fi
}

# Sets up a build directory, or re-applies the options to an existing one (Meson prints its summary
# either way). A directory left by an incompatible Meson is wiped and set up again. Options go to an
# existing directory through `meson configure`: Meson 1.0's `setup --reconfigure` keeps a build's
# old cpp_args.
configure() {
  local dir=$1
  shift
  if [[ ! -f $dir/meson-private/coredata.dat ]]; then
    meson setup "$dir" "$@"
  elif ! { meson configure "$dir" "$@" >/dev/null && meson setup --reconfigure "$dir"; }; then
    log "$dir: reconfiguring failed; wiping it and setting it up again"
    meson setup --wipe "$dir" "$@"
  fi
}
