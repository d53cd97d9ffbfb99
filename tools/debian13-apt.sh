# tools/debian13-apt.sh: sourced by bash scripts (not run). A private apt
# configuration for Debian 13 (trixie + trixie-backports, main), so that
# packages can be fetched with `apt-get download` / `install --download-only`
# on a Debian 12 machine without touching its own apt state.
#
#   . tools/debian13-apt.sh
#   debian13_apt_config DIR    # creates DIR/{etc,var}, writes DIR/apt.conf,
#                              # exports APT_CONFIG=DIR/apt.conf
#   apt-get update -q && apt-get download -t trixie-backports PKG
#
# The archive's address is the machine's own (a mirror or a proxy that is
# reachable where deb.debian.org may not be): the first Debian archive URI in
# /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list, falling back to
# http://deb.debian.org/debian. Calling it again on an existing DIR keeps the
# package lists and the download cache, and rewrites apt.conf for DIR's
# current place (a DIR that was moved gets its paths right again).

# Prints the first Debian archive URI of the machine's apt sources: an
# enabled "deb" entry with a main component whose first suite is a Debian
# release name; security archives (security.debian.org, debian-security) and
# third-party repositories (other suites or components) are skipped.
debian13_archive_uri() {
  local etc=${DEBIAN13_APT_ETC:-/etc/apt} f uri=
  local suites='^(buster|bullseye|bookworm|trixie|forky|duke|sid|oldstable|stable|testing|unstable)(-updates|-backports)?$'
  for f in "$etc"/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # deb822 stanzas are separated by blank lines; comments are dropped.
    uri=$(awk -v suites="$suites" '
      function flush() {
        if (!done && types ~ /(^| )deb( |$)/ && enabled !~ /^(no|false)$/ && comps ~ /(^| )main( |$)/) {
          split(suite, s, " ")
          n = split(uris, u, " ")
          for (i = 1; i <= n; i++)
            if (s[1] ~ suites && u[i] !~ /security/) { print u[i]; done = 1; exit }
        }
        types = uris = suite = comps = enabled = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      { key = tolower($1); sub(/^[^:]*:[ \t]*/, ""); v = $0 }
      key == "types:" { types = v }
      key == "uris:" { uris = v }
      key == "suites:" { suite = v }
      key == "components:" { comps = v }
      key == "enabled:" { enabled = tolower(v) }
      END { flush() }' "$f")
    [ -n "$uri" ] && break
  done
  if [ -z "$uri" ] && [ -f "$etc/sources.list" ]; then
    # One-line format: deb [options] URI suite component...
    uri=$(awk -v suites="$suites" '
      $1 != "deb" { next }
      { sub(/^deb[ \t]+(\[[^]]*\][ \t]+)?/, ""); split($0, w, /[ \t]+/) }
      w[1] !~ /security/ && w[2] ~ suites && (" " $0 " ") ~ / main / { print w[1]; exit }' \
      "$etc/sources.list")
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

# debian13_apt_config DIR: the private apt tree in DIR; exports APT_CONFIG.
debian13_apt_config() {
  debian_apt_config "$1" "trixie trixie-backports" amd64
}

# debian_apt_config DIR SUITES ARCH: the same for any suites and one
# architecture (tools/cross.sh: Debian 12's and 13's arm64 packages, for a
# sysroot; nothing of the machine's apt state is touched).
debian_apt_config() {
  local apt suites=$2 arch=$3
  mkdir -p "$1"
  apt=$(cd "$1" && pwd)
  mkdir -p "$apt/etc/apt/sources.list.d" "$apt/etc/apt/apt.conf.d" "$apt/etc/apt/preferences.d" \
    "$apt/var/lib/apt/lists/partial" "$apt/var/cache/apt/archives/partial" "$apt/var/lib/dpkg"
  # Nothing is installed there: an empty dpkg status makes apt fetch every
  # dependency, and keeps the machine's own packages out of the picture.
  [ -f "$apt/var/lib/dpkg/status" ] || : >"$apt/var/lib/dpkg/status"
  rm -f "$apt"/etc/apt/sources.list.d/*.sources
  cat >"$apt/etc/apt/sources.list.d/${suites%% *}.sources" <<SRC
Types: deb
URIs: $(debian13_archive_uri)
Suites: $suites
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  cat >"$apt/apt.conf" <<CONF
Dir "$apt/";
Dir::State "$apt/var/lib/apt/";
Dir::State::status "$apt/var/lib/dpkg/status";
Dir::Cache "$apt/var/cache/apt/";
Dir::Etc "$apt/etc/apt/";
Dir::Etc::SourceList "/dev/null";
Dir::Etc::SourceParts "$apt/etc/apt/sources.list.d/";
Dir::Etc::Parts "$apt/etc/apt/apt.conf.d/";
Dir::Etc::PreferencesParts "$apt/etc/apt/preferences.d/";
APT::Architecture "$arch";
APT::Architectures { "$arch"; };
CONF
  export APT_CONFIG=$apt/apt.conf
}

# debian13_has_version PKG VERSION: whether the lists (under APT_CONFIG)
# offer that exact version (`apt-cache show PKG=VERSION` succeeds either way).
debian13_has_version() {
  apt-cache madison "$1" 2>/dev/null | awk -v v="$2" -F' *[|] *' '$2 == v { found = 1 } END { exit !found }'
}
