# Sourced by scripts/bpftrace-tools: a private apt configuration under $1 that lists Debian's sid, trixie and
# bookworm on the mirror the machine already uses, leaving the machine's own apt sources and state alone. Sets
# `apt_options` and `mirror`; refreshes the index at most once a day (returns 1 when that fails). Arguments after
# the first name more architectures to list besides the machine's own (`arm64`).
private_apt() {
  local root=$1 arch
  shift
  mkdir -p "$root/lists/partial" "$root/archives/partial"
  # The mirror the machine already uses (its deb822 or one-line sources), else Debian's own.
  mirror=$(grep -rhoE '^(URIs:|deb) +\S*https?://\S+/debian/?' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
    | grep -oE 'https?://\S+' | head -n1 || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  local keyring=/usr/share/keyrings/debian-archive-keyring.gpg signed="" suite
  [[ -r $keyring ]] && signed="[signed-by=$keyring] "
  for suite in sid trixie bookworm; do
    echo "deb ${signed}${mirror%/} $suite main"
  done >"$root/sources.list"
  apt_options=(
    -o "Dir::Etc::SourceList=$root/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$root/lists" -o "Dir::Cache=$root" -o "Dir::Cache::Archives=$root/archives"
    -o Acquire::Languages=none -o "APT::Architectures::=$(dpkg --print-architecture)"
    # The mirror's sid Release file can be past its validity date.
    -o Acquire::Check-Valid-Until=false -o Debug::NoLocking=1
  )
  for arch in "$@"; do
    apt_options+=(-o "APT::Architectures::=$arch")
  done
  if [[ -z $(find "$root/lists" -maxdepth 1 -name '*_InRelease' -mtime -1 2>/dev/null) ]]; then
    apt-get "${apt_options[@]}" -qq update >&2 || return 1
  fi
}

# Every version of package $1 the private configuration lists, newest first, one per line.
private_apt_versions() {
  apt-cache "${apt_options[@]}" madison "$1" 2>/dev/null | awk -F'|' '{ gsub(/ /, "", $2); print $2 }' | sort -Vr -u
}
