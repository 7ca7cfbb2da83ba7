#!/usr/bin/env bash
# PC/SC interoperability test (issue 3): Debian's pcscd with vsmartcard-vpcd, a `cardbench card
# insert` virtual card on vpcd's TCP port, and pcsc_interop.py (pyscard + pyemv) as the terminal.
#
#   PROFILE=Scenarios/cards/<profile>.yaml Tests/Interop/run.sh \
#       --profile-pan <PAN> --pin <PIN> --imk <32 hex> --cvn <N> [--psn NN] [other pcsc_interop.py options]
#
# Runs as root (pcscd creates /run/pcscd). Needs: apt-get install -y pcscd vsmartcard-vpcd
# python3-pyscard, and a venv whose python imports both smartcard (pyscard) and pyemv (README.md).
# Environment: PROFILE (required), CARDBENCH (.build/debug/cardbench), PYTHON (.venv/bin/python),
# CARD_ARGS (--trace), TERMINAL (the pyscard script, Tests/Interop/pcsc_interop.py), TIMEOUT (30 s for reader and card), LOG_DIR (a new /tmp directory).
# Exit status: pcsc_interop.py's (0 pass, 1 mismatch, 2 environment), or 2 when the setup fails,
# or 1 when the card process exits before the terminal is done.
set -euo pipefail
cd "$(dirname "$0")/../.."

CARDBENCH=${CARDBENCH:-.build/debug/cardbench}
PYTHON=${PYTHON:-.venv/bin/python}
PCSCD=${PCSCD:-/usr/sbin/pcscd}
CARD_ARGS=${CARD_ARGS:---trace}
TERMINAL=${TERMINAL:-Tests/Interop/pcsc_interop.py}  # or Tests/Interop/oda_interop.py (issue 21), contactless_interop.py (issue 22)
CARD_VERB=${CARD_VERB:-insert}  # or tap: the card answers with a PC/SC part 3 ATR
TIMEOUT=${TIMEOUT:-30}
PORT=35963                  # vpcd's first slot: CHANNELID 0x8C7B in /etc/reader.conf.d/vpcd
READER="Virtual PCD 00 00"  # the PC/SC name pcscd gives that slot (the second, port 35964, is "00 01")
VPCD_DRIVER=/usr/lib/pcsc/drivers/serial/libifdvpcd.so
VPCD_CONF=/etc/reader.conf.d/vpcd

die() { echo "interop: $*" >&2; exit 2; }

[ -n "${PROFILE:-}" ] || die "set PROFILE to a card profile (a YAML file under Scenarios/cards/)"
[ -f "$PROFILE" ] || die "PROFILE=$PROFILE: no such file"
[ "$(id -u)" = 0 ] || die "run as root: pcscd creates /run/pcscd/pcscd.comm"
[ -x "$PCSCD" ] || die "$PCSCD missing: apt-get install -y pcscd vsmartcard-vpcd python3-pyscard"
[ -f "$VPCD_DRIVER" ] && [ -f "$VPCD_CONF" ] || die "vpcd missing: apt-get install -y vsmartcard-vpcd"
grep -Eqi '^[[:space:]]*CHANNELID[[:space:]]+0x8C7B' "$VPCD_CONF" || die "$VPCD_CONF does not put vpcd on port $PORT (CHANNELID 0x8C7B)"
[ -x "$CARDBENCH" ] || die "CARDBENCH=$CARDBENCH is not executable (swift build first)"
[ -x "$PYTHON" ] || die "PYTHON=$PYTHON missing (make venv)"
"$PYTHON" -c 'import smartcard, pyemv' 2>/dev/null || die "$PYTHON cannot import smartcard and pyemv: create the venv
  with Debian's /usr/bin/python3 -m venv --system-site-packages (sees python3-pyscard), or pip install pyscard
  into it (needs libpcsclite-dev swig gcc python3-dev); see Tests/Interop/README.md"
if pids=$(pidof pcscd); then
    die "pcscd is already running (pid $pids): stop it (systemctl stop pcscd.socket pcscd.service, or kill it)"
fi

port_listening() {  # is anything listening on $PORT? (from /proc: no iproute2 needed)
    local hex
    hex=$(printf '%04X' "$PORT")
    awk -v p=":$hex" '$2 ~ p"$" && $4 == "0A" { found = 1 } END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
port_listening && die "port $PORT is already in use"

LOG_DIR=${LOG_DIR:-$(mktemp -d /tmp/cardbench-interop.XXXXXX)}
mkdir -p "$LOG_DIR"
PCSCD_PID="" CARD_PID="" TERM_PID=""

stop() {  # stop one of our processes by pid: TERM, then KILL after 5 s
    local pid=$1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    stop "$TERM_PID"
    stop "$CARD_PID"   # the card first: vpcd then sees a removal, not a dead reader
    stop "$PCSCD_PID"
    if [ "$status" != 0 ]; then
        for f in card.log pcscd.log; do
            [ -s "$LOG_DIR/$f" ] && { echo "--- last lines of $LOG_DIR/$f"; tail -n 40 "$LOG_DIR/$f"; }
        done
    fi
    echo "interop: logs in $LOG_DIR; exit $status"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# pcscd in the foreground (no systemd, no udev needed: vpcd is a serial-style driver from
# /etc/reader.conf.d); --debug --apdu puts every APDU and status word in its log.
"$PCSCD" --foreground --debug --apdu >"$LOG_DIR/pcscd.log" 2>&1 &
PCSCD_PID=$!
for _ in $(seq 100); do
    port_listening && break
    kill -0 "$PCSCD_PID" 2>/dev/null || die "pcscd exited at start (see $LOG_DIR/pcscd.log)"
    sleep 0.1
done
port_listening || die "vpcd is not listening on port $PORT after 10 s (see $LOG_DIR/pcscd.log)"
echo "interop: pcscd (pid $PCSCD_PID) up, vpcd listening on port $PORT"

# The card: connects to vpcd as vsmartcard's vicc does; pcscd sees an insertion at its next poll.
# shellcheck disable=SC2086 # CARD_ARGS is a list of options
"$CARDBENCH" card "$CARD_VERB" --reader "127.0.0.1:$PORT" --profile "$PROFILE" $CARD_ARGS >"$LOG_DIR/card.log" 2>&1 &
CARD_PID=$!
echo "interop: $CARDBENCH card $CARD_VERB --reader 127.0.0.1:$PORT --profile $PROFILE $CARD_ARGS (pid $CARD_PID)"

"$PYTHON" -u "$TERMINAL" --reader "$READER" --timeout "$TIMEOUT" "$@" \
    > >(tee "$LOG_DIR/terminal.log") 2>&1 &
TERM_PID=$!

# Whichever ends first: the terminal (its status is ours) or the card (too early: a failure).
set +e
wait -n -p done_pid "$TERM_PID" "$CARD_PID"
status=$?
set -e
if [ "$done_pid" = "$CARD_PID" ] && [ "$CARD_VERB" = tap ]; then
    # A tapped card leaves the field when the reader powers it off, which can be before the
    # terminal process has exited: the terminal's status decides.
    CARD_PID=""
    set +e
    wait "$TERM_PID"
    status=$?
    set -e
    TERM_PID=""
    exit "$status"
fi
if [ "$done_pid" = "$CARD_PID" ]; then
    CARD_PID=""
    echo "interop: the card process exited (status $status) before the terminal finished" >&2
    exit 1
fi
TERM_PID=""
exit "$status"
