# Sourced by bench/cluster/run_pool.sh and run_scale.sh (from the repository
# root). bench_setup NAME TOOL... checks the tools are installed and this is
# root, builds openlaked with `make` if it is missing and fills the bench
# venv (bench/kv/venv_bench.sh: $VENV). make_namespaces N makes a bridge and N network namespaces plugged
# into it by veth pairs (as tests/integration/netns.py does), removed at
# exit (also on error). Sets NS[1..N] (names), IPS[1..N] (their addresses
# on the bridge's private /24 in 10.0.0.0/8, one no interface here has),
# IFS[1..N] (the veth end inside each).
bench_setup() {
  local name=$1 t
  shift
  for t in "$@"; do
    command -v "$t" >/dev/null ||
      { echo "$name: $t missing (scripts/deps.sh test / bench install it)" >&2; exit 1; }
  done
  [ "$(id -u)" = 0 ] || { echo "$name: network namespaces need root" >&2; exit 1; }
  [ -x build/openlaked ] || make
  . bench/kv/venv_bench.sh
}

make_namespaces() {
  local n=$1 i used net
  tag=$(printf %04x $((RANDOM % 65536)))
  br=olbb$tag
  used=$(ip -4 addr)
  for _ in $(seq 100); do
    net=10.$((200 + RANDOM % 50)).$((1 + RANDOM % 254))
    grep -q "inet $net\." <<<"$used" || break
  done
  NS=() IPS=() IFS_IN=()
  trap cleanup_namespaces EXIT
  ip link add "$br" type bridge
  ip addr add "$net.1/24" dev "$br"
  ip link set "$br" up
  for i in $(seq "$n"); do
    NS[$i]=olb$tag$i
    ip netns add "${NS[$i]}"
    ip link add "vhb$tag$i" type veth peer name "vnb$tag$i"
    ip link set "vnb$tag$i" netns "${NS[$i]}"
    ip link set "vhb$tag$i" master "$br" up
    IPS[$i]=$net.$((10 + i))
    IFS_IN[$i]=vnb$tag$i
    ip -n "${NS[$i]}" addr add "${IPS[$i]}/24" dev "vnb$tag$i"
    ip -n "${NS[$i]}" link set "vnb$tag$i" up
    ip -n "${NS[$i]}" link set lo up
  done
}

cleanup_namespaces() {
  local ns
  for ns in "${NS[@]}"; do
    ip netns del "$ns" 2>/dev/null || true    # its veth pair goes with it
  done
  ip link del "$br" 2>/dev/null || true
}
