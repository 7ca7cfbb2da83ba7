#!/usr/bin/env python3
"""An external ISO 8583 acquirer host for cardbench's terminals to connect to, built on PyPI's pyiso8583 and pyemv.

Listens on TCP, reads framed ISO 8583:1987 messages (binary2, ascii4 or nac framing; pyiso8583's
`default` or `default_ascii` spec) and answers them:

  0100/0200  -> 0110/0210: echoes 2 3 4 7 11 12 13 37 41 42 49, sets 39, 38 on approval, and 55
                with 91 (issuer authentication data) when the ARQC verified; the ARQC is recomputed
                with pyemv from the profile in --cards whose PAN (and AID, tag 84) it carries.
  0400/0420  -> 0410/0430 with 39 "00".
  0220       -> 0230 with 39 "00" (a completion advice: a captured pre-authorisation).
  0800       -> 0810 with 39 "00" (echoes 7, 11, 41, 70).
  other MTIs -> response MTI with 39 "12" (invalid transaction), so a peer never hangs on us.

What 0100/0200 get, first rule that matches wins (unless --no-amount-rules):
  amount ends in .88      no answer at all (the terminal's timeout; later messages still served)
  amount ends in .99      a valid length header around a body that is no ISO 8583 message
  amount 000000005100     decline 51 (with 91 over ARC "51" when the ARQC verified)
  ARQC does not verify    decline --bad-arqc-code (05), no 91
  amount ends in .77      approve, 91, and an issuer script (72 template) in 55
  otherwise               --mode: approve (default), decline, timeout, malformed, script, close
A card that no profile knows (or a request without ICC data) is approved without 91.

--log appends one JSON line per message received and per answer sent (the fields are listed at
log_record below). SIGTERM or SIGINT stops the host with exit status 0.
"""
import argparse
import itertools
import os
import random
import signal
import socket
import socketserver
import string
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import iso8583_common as c  # noqa: E402

MODES = ("approve", "decline", "timeout", "malformed", "script", "close")
# The body of a "malformed" answer: its first four bytes are no MTI in either spec, so any
# decoder fails at once, while the framing around it stays valid and the stream in step.
GARBAGE = bytes.fromhex("DEADBEEF") + b"not an ISO 8583 message" + bytes(4)


def say(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


class ArqcCheck:
    """The outcome of looking the card up and recomputing its ARQC."""

    def __init__(self, ok=None, note="", profile=None, cvn=None, keys=None, arqc=None, atc=None):
        self.ok, self.note, self.profile, self.cvn = ok, note, profile, cvn
        self.keys, self.arqc, self.atc = keys, arqc, atc


class Host:
    def __init__(self, args):
        self.args = args
        self.framer = c.Framer(args.framing)
        self.log = c.JsonLog(args.log)
        self.cards = c.load_cards(args.cards, warn=lambda m: say(f"host: {m}"))
        self.random = random.Random(args.seed)
        self.lock = threading.Lock()
        self.script_ids = itertools.count(1)
        self.connections = itertools.count(1)

    # ------------------------------------------------------------------ the card and its ARQC

    def check_arqc(self, fields, icc):
        """Finds the card's keys and recomputes the ARQC. ok: True/False, or None when the host
        cannot tell (unknown card, no ICC data)."""
        pan = fields.get("2") or (fields.get("35") or "").split("=")[0]
        profiles = self.cards.get(pan)
        if not profiles:
            return ArqcCheck(None, f"no profile in {self.args.cards} has PAN {pan or '(none)'}")
        if icc is None:
            return ArqcCheck(None, "no ICC data (field 55): nothing to verify")
        arqc = icc.get("9F26")
        if not arqc or len(arqc) != 8:
            return ArqcCheck(None, "field 55 has no 8-byte ARQC (9F26)")
        aid = c.h(icc["84"]) if icc.get("84") else None
        # A real issuer derives the card's key with the PSN the message carries (field 23),
        # so a wrong field 23 shows as a failed ARQC rather than being papered over.
        psn23 = fields.get("23")
        contactless = (fields.get("22") or "").startswith("07")
        notes, candidates = [], []
        for p in profiles:
            psn = psn23[-2:] if psn23 else p.psn
            if psn23 and psn != p.psn:
                notes.append(f"field 23 says PSN {psn}, {p.file} says {p.psn}")
            for app in p.applications:
                if aid and app.aid != aid:
                    continue
                # cardbench keys a tap with the application's contactless CVN when it has one
                # (Host.swift, IssuerAccount.keys(for:)): entry mode 07.
                cvn = app.contactless_cvn if contactless and app.contactless_cvn else app.cvn
                candidates.append((p, app, cvn, psn))
        if not candidates:
            return ArqcCheck(None, f"PAN {pan} is known but no application has AID {aid}")
        failures = []
        for p, app, cvn, psn in candidates:
            keys = c.card_keys(cvn, app.imk, pan, psn)
            try:
                if c.arqc_matches(keys, cvn, icc, arqc):
                    return ArqcCheck(True, "; ".join(notes), p.file, cvn, keys, arqc, icc["9F36"])
                failures.append(f"{p.file} CVN {cvn}: pyemv {c.h(c.generate_arqc(keys, cvn, icc))} != {c.h(arqc)}")
            except c.CryptogramInputError as e:
                failures.append(f"{p.file} CVN {cvn}: {e}")
        named = c.iad_cvn(icc.get("9F10") or b"")
        if named and all(named != cand[2] for cand in candidates):
            notes.append(f"the IAD names CVN {named}")
        first = candidates[0]
        return ArqcCheck(False, "; ".join(failures + notes), first[0].file, first[2])

    # ------------------------------------------------------------------ deciding

    def decide(self, fields, check):
        """(behaviour, response code) for a 0100/0200; behaviour is one of approve, decline,
        script, timeout, malformed, close, bad-arqc."""
        amount = fields.get("4", "")
        cents = amount[-2:]
        if not self.args.no_amount_rules:
            if cents == "88":
                return "timeout", None
            if cents == "99":
                return "malformed", None
            if amount == "000000005100":
                return "decline", "51"
        if check.ok is False:
            return "bad-arqc", self.args.bad_arqc_code
        if not self.args.no_amount_rules and cents == "77":
            return "script", "00"
        mode = self.args.mode
        if mode == "decline":
            return "decline", self.args.decline_code
        if mode in ("approve", "script"):
            return mode, "00"
        return mode, None

    def auth_code(self):
        with self.lock:
            return "".join(self.random.choice(string.ascii_uppercase + string.digits) for _ in range(6))

    def answer_authorisation(self, fields, icc, check, behaviour, code):
        out = {"t": c.response_mti(fields["t"])}
        for n in c.ECHO_FIELDS:
            if n in fields:
                out[n] = fields[n]
        out["39"] = code
        if code in c.APPROVAL_CODES:
            out["38"] = self.auth_code()
        answer_icc = {}
        # 91 only for an ARQC that verified: an ARPC over a cryptogram the card did not make
        # would authenticate nothing (cardbench's own host sends one anyway; see the report).
        if check.ok:
            answer_icc["91"] = c.issuer_authentication_data(check.keys, check.cvn, check.arqc, check.atc, code)
        if behaviour == "script":
            with self.lock:
                script_id = next(self.script_ids).to_bytes(4, "big")
            header = c.SCRIPT_COMMANDS[self.args.script_command]
            if check.ok:
                answer_icc.update(c.issuer_script_72(script_id, header, check.keys, check.arqc, check.atc))
            else:
                answer_icc.update(c.issuer_script_72(script_id, header))
        if answer_icc:
            out["55"] = c.h(c.pyemv_tlv.encode(answer_icc))
        return out

    def answer(self, fields):
        """(answer fields or None, behaviour, extra log data for the request)."""
        mti = fields["t"]
        if mti in ("0100", "0200"):
            icc = None
            if "55" in fields:
                try:
                    icc = c.decode_icc(fields["55"])
                except Exception as e:  # an ICC field that is not TLV fails the check, not the host
                    check = ArqcCheck(False, f"field 55 is not BER-TLV: {e}")
                    behaviour, code = self.decide(fields, check)
                    return self._auth_outcome(fields, None, check, behaviour, code)
            check = self.check_arqc(fields, icc)
            behaviour, code = self.decide(fields, check)
            return self._auth_outcome(fields, icc, check, behaviour, code)
        if mti in ("0400", "0401", "0420", "0421", "0220", "0221"):
            out = {"t": c.response_mti(mti)}
            for n in c.ECHO_FIELDS:
                if n in fields:
                    out[n] = fields[n]
            out["39"] = "00"
            return out, ("completion" if mti.startswith("022") else "reversal"), {}
        if mti == "0800":
            out = {"t": "0810"}
            for n in ("7", "11", "41", "70"):
                if n in fields:
                    out[n] = fields[n]
            out["39"] = "00"
            return out, "network", {}
        if len(mti) == 4 and mti.isdigit() and int(mti[2]) % 2 == 0:
            out = {"t": c.response_mti(mti)}
            for n in c.ECHO_FIELDS:
                if n in fields:
                    out[n] = fields[n]
            out["39"] = "12"
            return out, "unsupported", {}
        return None, "ignored", {}  # a response MTI sent to us: nothing to answer

    def _auth_outcome(self, fields, icc, check, behaviour, code):
        extra = {"arqc_ok": check.ok, "arqc_note": check.note, "profile": check.profile, "cvn": check.cvn}
        if behaviour in ("timeout", "malformed", "close"):
            return None, behaviour, extra
        return self.answer_authorisation(fields, icc, check, behaviour, code), behaviour, extra


def log_record(conn, peer, direction, mti=None, fields=None, **extra):
    """One JSON log line. Every line: ts (UTC, ISO 8601), conn (connection number), peer,
    direction ("in" | "out"), mti (null for bytes that are no message), fields ({"2": "...", ...}:
    every data element as pyiso8583 decodes it, binary ones as upper-case hex), icc (field 55
    decoded as TLV, hex values, when it is TLV). Requests 0100/0200 add arqc_ok (true/false/null),
    arqc_note, profile, cvn; lines add behaviour; undecodable input adds error and raw (hex)."""
    record = {"ts": c.utc_now().isoformat(timespec="milliseconds").replace("+00:00", "Z"),
              "conn": conn, "peer": peer, "direction": direction, "mti": mti, "fields": fields or {}}
    if fields and "55" in fields:
        record["icc"] = c.icc_for_log(fields["55"])
    record.update(extra)
    return record


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        host = self.server.host
        sock = self.request
        conn = next(host.connections)
        peer = "%s:%d" % self.client_address[:2]
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        say(f"host: connection {conn} from {peer}")
        try:
            while True:
                try:
                    tpdu, message = host.framer.read(sock)
                except c.PeerClosed:
                    say(f"host: connection {conn} closed by {peer}")
                    return
                except c.FramingError as e:
                    # Cannot find the next frame once the stream is off: drop the connection.
                    host.log.write(log_record(conn, peer, "in", error=f"framing: {e}"))
                    say(f"host: connection {conn}: framing error ({e}); closing")
                    return
                if not self.serve_one(host, conn, peer, tpdu, message):
                    return
        except (ConnectionResetError, BrokenPipeError, OSError) as e:
            say(f"host: connection {conn}: {e}")

    def serve_one(self, host, conn, peer, tpdu, message):
        """Answers one message; False to close the connection."""
        try:
            decoded = c.unpack(message, host.args.spec)
        except Exception as e:
            host.log.write(log_record(conn, peer, "in", error=f"decode: {e}", raw=c.h(message)))
            say(f"host: connection {conn}: undecodable message ({e}); no answer")
            return True
        fields = c.data_fields(decoded)
        fields_with_mti = dict(fields, t=decoded["t"])
        answer, behaviour, extra = host.answer(fields_with_mti)
        host.log.write(log_record(conn, peer, "in", decoded["t"], fields, behaviour=behaviour, **extra))
        note = f" arqc_ok={extra['arqc_ok']}" if "arqc_ok" in extra else ""
        amount = f" amount {fields['4']}" if "4" in fields else ""
        say(f"host: {conn} <- {decoded['t']} STAN {fields.get('11', '-')}{amount}{note} -> {behaviour}")
        reply = c.reply_tpdu(tpdu) if tpdu else None
        if behaviour == "timeout" or (answer is None and behaviour == "ignored"):
            return True
        if behaviour == "close":
            return False
        if behaviour == "malformed":
            self.request.sendall(host.framer.frame(GARBAGE, reply))
            host.log.write(log_record(conn, peer, "out", None, None, behaviour=behaviour, raw=c.h(GARBAGE)))
            return True
        raw = c.pack(answer, host.args.spec)
        self.request.sendall(host.framer.frame(raw, reply))
        host.log.write(log_record(conn, peer, "out", answer["t"], c.data_fields(answer), behaviour=behaviour))
        say(f"host: {conn} -> {answer['t']} 39={answer.get('39')}{' 38=' + answer['38'] if '38' in answer else ''}"
            f"{' 55=' + answer['55'] if '55' in answer else ''}")
        return True


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True        # open connections do not keep a stopping host alive
    allow_reuse_address = True
    block_on_close = False


def parse_address(text):
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="The rules and the log format are in the module docstring and at log_record.")
    p.add_argument("--listen", type=parse_address, default=("127.0.0.1", 0), help="HOST:PORT (default 127.0.0.1:0)")
    p.add_argument("--port-file", help="write the bound port here (atomically) once listening")
    p.add_argument("--spec", choices=sorted(c.SPECS), default="default", help="pyiso8583 spec (default: default)")
    p.add_argument("--framing", choices=c.FRAMINGS, default="binary2", help="default binary2")
    p.add_argument("--cards", default=c.DEFAULT_CARDS, help="card profiles directory (default Scenarios/cards)")
    p.add_argument("--log", help="append one JSON line per message received and answer sent")
    p.add_argument("--mode", choices=MODES, default="approve",
                   help="what an ordinary 0100/0200 gets (default approve; the ARQC check and amount rules come first)")
    p.add_argument("--decline-code", default="05", help="39 in --mode decline (default 05)")
    p.add_argument("--bad-arqc-code", default="05", help="39 when the ARQC does not verify (default 05)")
    p.add_argument("--no-amount-rules", action="store_true", help="ignore the .88/.99/51.00/.77 amount rules")
    p.add_argument("--script-command", choices=sorted(c.SCRIPT_COMMANDS), default="unblock",
                   help="the command in the .77 issuer script (default unblock: harmless to a working card)")
    p.add_argument("--seed", type=int, help="seed the authorisation codes (reproducible runs)")
    args = p.parse_args(argv)
    for name in ("decline_code", "bad_arqc_code"):
        if len(getattr(args, name)) != 2:
            p.error(f"--{name.replace('_', '-')} must be 2 characters")
    if not os.path.isdir(args.cards):
        say(f"ENVIRONMENT: --cards {args.cards} is not a directory")
        return 2

    host = Host(args)
    try:
        server = Server(args.listen, Handler)
    except OSError as e:
        say(f"ENVIRONMENT: cannot listen on {args.listen[0]}:{args.listen[1]}: {e}")
        return 2
    server.host = host
    port = server.server_address[1]
    if args.port_file:
        # Written whole and renamed, so a test polling for it never reads half a number.
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, args.port_file)
    cards = sum(len(v) for v in host.cards.values())
    say(f"host: listening on {server.server_address[0]}:{port} ({args.spec}, {args.framing}, "
        f"{cards} profiles, mode {args.mode})")

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    serving.start()
    while not stop.wait(0.2):
        pass
    server.shutdown()
    server.server_close()
    say("host: stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
