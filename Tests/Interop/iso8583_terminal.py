#!/usr/bin/env python3
"""An external ISO 8583 terminal for cardbench's host listener, built on PyPI's pyiso8583 and pyemv.

For each --profile it makes ARQCs with pyemv from the profile's issuer master key, PAN, PSN and
CVN (IAD in the CVN's layout, AIP from the profile, today's date, a random UN, an ATC of its
own), sends them in framed ISO 8583 messages over one TCP connection, and checks the answers:

  0800 echo (once)              -> 0810, 39 00, STAN echoed
  0200 sale per --amount        -> 0210, 39 as expected, the request's 2 3 4 7 11 12 13 37 41 42
                                   49 echoed, 38 (6 characters) on approval, and 55 holding 91
                                   whose ARPC is pyemv's for our ARQC and the ARC (ASCII of 39)
                                   or CSU it carries; a 91 on a decline must verify too
  0200 refund per --refund      -> as a sale, processing code 200000, 9C 20
  0100 pre-authorisation        -> 0110, as a sale
  0200 with one bit of 9F26     -> any code cardbench does not treat as an approval, and no 91
       flipped (tampered)          that authenticates the genuine ARQC or says "approved"
  0400 reversal of the first    -> 0410, 39 00 (field 90: original MTI, STAN, field 7, 22 zeros)
       approved sale

Expected codes: --expect AMOUNT=CODE (AMOUNT in minor units or with a decimal point; CODE two
characters, or decline, timeout, malformed, script). Without one: what cardbench's emulated
issuer answers from the profile (41 lost, 43 stolen, 62 blocked, 54 expired, 51 over the
balance, else 00), or with --against-peer-host the amount rules of iso8583_host.py (which adds
its .77/.88/.99/51.00 cases and an 0420 advice for the timed-out one to the built-in set).

Prints one PASS/FAIL line per case. Exit status: 0 all passed; 1 a case failed; 2 environment
(cannot connect, a profile cannot be read).
"""
import argparse
import decimal
import json
import os
import random
import select
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import iso8583_common as c  # noqa: E402

EXPECT_WORDS = ("decline", "timeout", "malformed", "script")


class EnvironmentNotReady(Exception):
    pass


# ------------------------------------------------------------------------------------ the link

class Answer:
    """What came back: kind is answer, timeout, malformed (a frame pyiso8583 cannot decode),
    closed (the host hung up) or framing (a broken frame)."""

    def __init__(self, kind, fields=None, tpdu=None, raw=None, error=None):
        self.kind, self.fields, self.tpdu, self.raw, self.error = kind, fields, tpdu, raw, error


class Link:
    """One TCP connection to the host, kept across cases as a terminal keeps it; re-opened when
    the host closed it or a frame broke (a stream out of step cannot be read on)."""

    def __init__(self, address, framer, spec, timeout, verbose):
        self.address, self.framer, self.spec, self.timeout, self.verbose = address, framer, spec, timeout, verbose
        self.sock = None
        self.late_stans = set()  # STANs we stopped waiting for: their answers may still come

    def connect(self):
        if self.sock:
            return
        try:
            self.sock = socket.create_connection(self.address, timeout=5)
        except OSError as e:
            raise EnvironmentNotReady(f"cannot connect to {self.address[0]}:{self.address[1]}: {e}")
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def drop(self):
        if self.sock:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None

    def exchange(self, fields, wait):
        """Sends one message, waits up to `wait` s for the frame that answers it (MTI + STAN)."""
        self.connect()
        raw = c.pack(fields, self.spec)
        if self.verbose:
            print(f"     >> {fields['t']} {json.dumps(c.data_fields(fields))}")
        try:
            self.sock.sendall(self.framer.frame(raw))
        except OSError as e:
            self.drop()
            return Answer("closed", error=f"send failed: {e}")
        deadline = time.monotonic() + wait
        want_mti, want_stan = c.response_mti(fields["t"]), fields.get("11")
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if want_stan:
                    self.late_stans.add(want_stan)
                return Answer("timeout")
            # Wait for the first byte of a frame with the case's deadline; once a frame starts,
            # the whole of it must come within --timeout or the stream is out of step.
            ready, _, _ = select.select([self.sock], [], [], remaining)
            if not ready:
                continue
            self.sock.settimeout(self.timeout)
            try:
                tpdu, message = self.framer.read(self.sock)
            except c.PeerClosed:
                self.drop()
                return Answer("closed", error="the host closed the connection")
            except (c.FramingError, socket.timeout, OSError) as e:
                self.drop()
                return Answer("framing", error=str(e))
            try:
                decoded = c.unpack(message, self.spec)
            except Exception as e:
                return Answer("malformed", tpdu=tpdu, raw=message, error=str(e))
            got = c.data_fields(decoded)
            got["t"] = decoded["t"]
            if self.verbose:
                print(f"     << {decoded['t']} {json.dumps(c.data_fields(decoded))}")
            stan = got.get("11")
            if stan in self.late_stans and stan != want_stan:
                print(f"     (late answer {got['t']} to STAN {stan} discarded)")
                self.late_stans.discard(stan)
                continue
            return Answer("answer", fields=got, tpdu=tpdu, raw=message)


# ------------------------------------------------------------------------------------ the card

class Card:
    """A profile's application as the terminal uses it: keys, CVN, AIP, and an ATC of our own."""

    def __init__(self, profile, aid, entry_mode):
        self.profile = profile
        self.app = profile.application(aid)
        contactless_only = profile.interfaces == ["contactless"]
        self.entry_mode = entry_mode or ("071" if contactless_only else "051")
        tap = self.entry_mode.startswith("07")
        # A tap uses the contactless CVN and AIP when the profile gives them (as cardbench's card does).
        self.cvn = (self.app.contactless_cvn if tap and self.app.contactless_cvn else self.app.cvn)
        self.aip = (self.app.contactless_aip if tap and self.app.contactless_aip else self.app.aip)
        self.keys = c.card_keys(self.cvn, self.app.imk, profile.pan, profile.psn)
        # An ATC well above what a fresh virtual card reaches, different per run; it only has to
        # be the same in 9F36 and in the cryptogram.
        self.atc = random.randint(0x0100, 0x7000)

    def next_atc(self):
        self.atc += 1
        return self.atc.to_bytes(2, "big")


def bcd(n, digits):
    return bytes.fromhex(str(n).rjust(digits, "0"))


def icc_request(card, amount, txn_type, stan, now, args):
    """Field 55 as cardbench sends it (tags in its order) and the ARQC over it."""
    tags = {
        "82": card.aip,
        "84": bytes.fromhex(card.app.aid),
        "95": bytes(5),                                   # TVR: nothing wrong
        "9A": bytes.fromhex(now.strftime("%y%m%d")),
        "9C": bytes([txn_type]),
        "5F2A": bcd(args.currency, 4),
        "9F02": bcd(amount, 12),
        "9F03": bytes(6),
        "9F09": card.app.app_version,
        "9F10": c.build_iad(card.cvn, card.app.kdi,
                            counters=bytes.fromhex("00000000000322FF") if card.cvn in (17, 21) else None),
        "9F1A": bcd(args.country, 4),
        "9F1E": b"PYTERM01",                              # IFD serial number
        "9F26": None,                                     # filled below, kept in cardbench's order
        "9F27": b"\x80",                                  # ARQC
        "9F33": bytes.fromhex("E0F8C8"),
        "9F34": bytes.fromhex("1F0302"),                  # no CVM required, successful
        "9F35": b"\x22",
        "9F36": card.next_atc(),
        "9F37": os.urandom(4),
        "9F41": bcd(int(stan), 8),
    }
    tags["9F26"] = c.generate_arqc(card.keys, card.cvn, tags)
    return tags


class Stan:
    def __init__(self, start):
        self.value = start

    def next(self):
        self.value = self.value % 999999 + 1
        return "%06d" % self.value


def date_fields(now):
    return {"7": now.strftime("%m%d%H%M%S"), "12": now.strftime("%H%M%S"), "13": now.strftime("%m%d")}


def rrn(now, stan):
    """YDDDHH + STAN: 12 characters, unique enough per terminal and day."""
    return now.strftime("%y")[-1] + now.strftime("%j%H") + stan


def track2(profile):
    """Track 2 equivalent with '=' (as cardbench's stripe data: PVKI 1, PVV 0000, CVV 000, 00000)."""
    return f"{profile.pan}={profile.expiry_yymm}{profile.service_code}1000000000000"[:37]


def authorisation(card, mti, amount, processing, stan, args, tamper=False):
    """(request fields, the ICC tags, the genuine ARQC)."""
    now = c.utc_now()
    icc = icc_request(card, amount, 0x20 if processing == "200000" else 0x00, stan, now, args)
    genuine = icc["9F26"]
    if tamper:
        icc = dict(icc, **{"9F26": genuine[:-1] + bytes([genuine[-1] ^ 0x01])})
    p = card.profile
    fields = {"t": mti, "2": p.pan, "3": processing, "4": "%012d" % amount, **date_fields(now), "11": stan,
              "14": p.expiry_yymm, "22": card.entry_mode, "23": "0" + p.psn, "25": "00", "35": track2(p),
              "37": rrn(now, stan), "41": args.terminal_id, "42": args.merchant_id, "49": "%03d" % args.currency,
              "55": c.h(c.pyemv_tlv.encode(icc))}
    return fields, icc, genuine


def reversal(original, answer, stan, args, advice=False):
    """0400 (or 0420 advice) as cardbench writes one: the original's fields, new 7/11/12/13, 38
    and a reason in 39 (06, or 68 when no answer came), the ICC data, and 90."""
    now = c.utc_now()
    fields = {"t": "0420" if advice else "0400"}
    for n in ("2", "3", "4", "14", "22", "23", "25", "37", "41", "42", "49"):
        if n in original:
            fields[n] = original[n]
    fields.update(date_fields(now))
    fields["11"] = stan
    if answer and "38" in answer:
        fields["38"] = answer["38"]
    fields["39"] = "06" if answer else "68"
    if "55" in original:
        fields["55"] = original["55"]
    fields["90"] = original["t"] + original["11"] + original["7"] + "0" * 22
    return fields


# ------------------------------------------------------------------------------------ expectations

def parse_amount(text):
    """Minor units from '1000' or '10.00'."""
    text = text.strip()
    if "." in text:
        return int(decimal.Decimal(text) * 100)
    if not text.isdigit():
        raise ValueError(f"not an amount: {text!r}")
    return int(text)


def peer_host_expectation(amount):
    """iso8583_host.py's amount rules, in its order (an ARQC that verifies is assumed)."""
    cents = amount % 100
    if cents == 88:
        return "timeout"
    if cents == 99:
        return "malformed"
    if amount == 5100:
        return "51"
    if cents == 77:
        return "script"
    return "00"


def cardbench_expectation(profile, amount, refund):
    """What cardbench's emulated issuer answers a genuine ARQC from this profile (Host.swift's
    order: lost, stolen, blocked, expired, balance), before any amount table it is configured with."""
    if profile.lost:
        return "41"
    if profile.stolen:
        return "43"
    if profile.blocked:
        return "62"
    if profile.expiry_yymm < c.utc_now().strftime("%y%m"):
        return "54"
    if not refund and profile.balance is not None and amount > profile.balance:
        return "51"
    return "00"


def expectation(args, profile, amount, refund=False):
    if amount in args.expect:
        return args.expect[amount]
    if args.against_peer_host:
        return peer_host_expectation(amount)
    return cardbench_expectation(profile, amount, refund)


# ------------------------------------------------------------------------------------ checks

def check_echo(request, answer, numbers):
    out = []
    for n in numbers:
        if n in request and answer.get(n) != request[n]:
            out.append(f"field {n} is {answer.get(n)!r}, the request's {request[n]!r}")
    return out


def check_transport(request, got, args):
    """MTI and, for NAC, the swapped TPDU; returns reasons it is wrong."""
    reasons = []
    want = c.response_mti(request["t"])
    if got.fields["t"] != want:
        reasons.append(f"MTI {got.fields['t']}, expected {want}")
    if args.framing == "nac" and got.tpdu != c.reply_tpdu(c.DEFAULT_TPDU):
        reasons.append(f"TPDU {c.h(got.tpdu or b'')}, expected {c.h(c.reply_tpdu(c.DEFAULT_TPDU))} (ours swapped)")
    return reasons


def answer_icc(fields):
    if "55" not in fields:
        return {}, None
    try:
        return c.decode_icc(fields["55"]), None
    except Exception as e:
        return {}, f"field 55 of the answer is not BER-TLV: {e}"


def check_authorisation(card, request, icc, genuine, got, expect, args, tamper=False):
    """(reasons it failed, notes) for a 0110/0210."""
    reasons, notes = [], []
    if expect in ("timeout", "malformed"):
        if got.kind != expect:
            reasons.append(f"expected {expect}, got {describe(got)}")
        else:
            notes.append("no answer in time" if expect == "timeout" else f"undecodable answer ({got.error})")
        return reasons, notes
    if got.kind != "answer":
        return [f"expected an answer, got {describe(got)}"], notes
    a = got.fields
    reasons += check_transport(request, got, args)
    reasons += check_echo(request, a, c.ECHO_FIELDS)
    code = a.get("39")
    approved = code in c.APPROVAL_CODES
    if code is None:
        return reasons + ["no field 39"], notes
    if expect == "decline":
        if approved:
            reasons.append(f"39 {code}: expected a decline")
    elif expect == "script":
        if code != "00":
            reasons.append(f"39 {code}, expected 00 (with an issuer script)")
    elif code != expect:
        reasons.append(f"39 {code}, expected {expect}")
    if approved and not (a.get("38") and len(a["38"]) == 6):
        reasons.append(f"38 is {a.get('38')!r} on an approval: 6 characters expected")
    notes.append(f"39={code}" + (f" 38={a['38']}" if "38" in a else ""))

    tlv, error = answer_icc(a)
    if error:
        return reasons + [error], notes
    iad91 = tlv.get("91")
    method = c.ARPC_METHOD[card.cvn]
    if tamper:
        # The host saw a cryptogram the card never made: it must not authenticate the card's
        # real one, nor tell the card it approved.
        if iad91 is not None:
            ok, _, arc, _ = c.check_issuer_authentication_data(card.keys, card.cvn, genuine, icc["9F36"], iad91)
            if ok:
                reasons.append("91 authenticates the genuine ARQC, which the host never received")
            if arc is not None and (arc[1] & 0x80 if method == 2 else arc.decode("latin-1") in c.APPROVAL_CODES):
                reasons.append(f"91 carries an approving {'CSU' if method == 2 else 'ARC'} {c.h(arc)}")
            notes.append(f"91 {c.h(iad91)} present (not valid for the card's ARQC)")
        else:
            notes.append("no 91")
        return reasons, notes
    if iad91 is None:
        if approved:
            reasons.append("approved without 91 (issuer authentication data) in 55")
        else:
            notes.append("no 91")
    else:
        ok, arpc, arc, why = c.check_issuer_authentication_data(card.keys, card.cvn, icc["9F26"], icc["9F36"], iad91)
        if not ok:
            reasons.append(f"91 does not verify: {why}")
        elif method == 1 and arc != code.encode("ascii"):
            reasons.append(f"91's ARC {c.h(arc)} is not field 39 {code!r} in ASCII ({c.h(code.encode('ascii'))})")
        elif method == 2 and bool(arc[1] & 0x80) != approved:
            reasons.append(f"91's CSU {c.h(arc)} says {'approved' if arc[1] & 0x80 else 'declined'}, 39 says {code}")
        else:
            notes.append(f"ARPC {c.h(arpc)} verified (CVN {card.cvn}, method {method}, "
                         f"{'ARC' if method == 1 else 'CSU'} {c.h(arc)})")
    if expect == "script":
        script = tlv.get("72")
        if not isinstance(script, dict) or "86" not in script:
            reasons.append("no issuer script template 72 with a command (86) in 55")
        else:
            command = script["86"]
            mac = card.keys.generate_command_mac(command_header=command[:5], tag_9f26=icc["9F26"], tag_9f36=icc["9F36"])
            notes.append(f"script 9F18 {c.h(script.get('9F18', b''))} 86 {c.h(command)}"
                         + (" (MAC = pyemv's)" if command[5:] == mac else " (MAC not pyemv's for this card)"))
    elif "72" in tlv or "71" in tlv:
        notes.append("issuer script present")
    return reasons, notes


def describe(got):
    if got.kind == "answer":
        return f"{got.fields['t']} 39={got.fields.get('39')}"
    return got.kind + (f" ({got.error})" if got.error else "")


# ------------------------------------------------------------------------------------ running

class Runner:
    def __init__(self, args):
        self.args = args
        self.link = Link(args.connect, c.Framer(args.framing), args.spec, args.timeout, args.verbose)
        self.stan = Stan(args.stan_start if args.stan_start else int(time.time()) % 900000 + 1)
        self.results = []

    def record(self, name, profile, request, got, expect, reasons, notes, started, skipped=False):
        result = "SKIP" if skipped else ("FAIL" if reasons else "PASS")
        label = f"[{profile}] " if profile else ""
        text = "; ".join(reasons) if reasons else ", ".join(notes)
        print(f"{result} {label}{name}: {text}", flush=True)
        self.results.append({
            "name": name, "profile": profile, "result": result, "reasons": reasons, "notes": notes,
            "mti": request.get("t") if request else None, "stan": request.get("11") if request else None,
            "amount": request.get("4") if request else None, "expect": expect,
            "answer_kind": got.kind if got else None,
            "answer_mti": got.fields.get("t") if got and got.fields else None,
            "response_code": got.fields.get("39") if got and got.fields else None,
            "elapsed_ms": round((time.monotonic() - started) * 1000, 1),
            "request": c.data_fields(request) if request else None,
            "answer": c.data_fields(got.fields) if got and got.fields else None,
        })

    def wait_for(self, expect):
        return self.args.no_answer_wait if expect == "timeout" else self.args.timeout

    def echo(self):
        started = time.monotonic()
        now = c.utc_now()
        request = {"t": "0800", "7": now.strftime("%m%d%H%M%S"), "11": self.stan.next(),
                   "41": self.args.terminal_id, "70": "301"}
        got = self.link.exchange(request, self.args.timeout)
        reasons = []
        if got.kind != "answer":
            reasons.append(f"expected 0810, got {describe(got)}")
        else:
            reasons += check_transport(request, got, self.args)
            reasons += check_echo(request, got.fields, ("11",))
            if got.fields.get("39") != "00":
                reasons.append(f"39 {got.fields.get('39')}, expected 00")
        self.record("0800 echo", None, request, got, "00", reasons, [describe(got)], started)

    def authorise(self, card, mti, amount, processing, expect, label, tamper=False):
        started = time.monotonic()
        request, icc, genuine = authorisation(card, mti, amount, processing, self.stan.next(), self.args, tamper)
        got = self.link.exchange(request, self.wait_for(expect))
        reasons, notes = check_authorisation(card, request, icc, genuine, got, expect, self.args, tamper)
        name = f"{mti} {label} {amount / 100:.2f}" + (f" (expect {expect})" if expect != "00" else "")
        self.record(name, card.profile.file, request, got, expect, reasons, notes, started)
        return request, got

    def reverse(self, card, original, answer, advice=False):
        started = time.monotonic()
        request = reversal(original, answer, self.stan.next(), self.args, advice)
        got = self.link.exchange(request, self.args.timeout)
        reasons = []
        if got.kind != "answer":
            reasons.append(f"expected {c.response_mti(request['t'])}, got {describe(got)}")
        else:
            reasons += check_transport(request, got, self.args)
            reasons += check_echo(request, got.fields, c.ECHO_FIELDS)
            if got.fields.get("39") != "00":
                reasons.append(f"39 {got.fields.get('39')}, expected 00")
        what = "reversal advice" if advice else "reversal"
        self.record(f"{request['t']} {what} of {original['t']} STAN {original['11']}", card.profile.file, request, got,
                    "00", reasons, [describe(got), f"90={request['90']}"], started)
        if advice or self.args.against_peer_host or got.kind != "answer":
            return
        # The same reversal again — as its repeat (0401), and as the same 0400 a second time —
        # is answered what the first was (00), as a repeated authorisation is: the terminal's
        # first answer may have been lost, and it was reversed once.
        for mti in ("0401", "0400"):
            started = time.monotonic()
            again = dict(request, t=mti)
            answer = self.link.exchange(again, self.args.timeout)
            reasons = []
            if answer.kind != "answer":
                reasons.append(f"expected 0410, got {describe(answer)}")
            else:
                reasons += check_transport(again, answer, self.args)
                if answer.fields.get("39") != got.fields.get("39"):
                    reasons.append(f"39 {answer.fields.get('39')}, expected the first answer's {got.fields.get('39')}")
            self.record(f"{mti} again for the reversal STAN {request['11']}", card.profile.file, again, answer, "00",
                        reasons, [describe(answer)], started)

    def missing_amount(self, card):
        """A 0200 without field 4 is a format error: 30, never 13 (invalid amount)."""
        started = time.monotonic()
        request, _, _ = authorisation(card, "0200", 1000, "000000", self.stan.next(), self.args)
        del request["4"]
        got = self.link.exchange(request, self.args.timeout)
        reasons = []
        if got.kind != "answer":
            reasons.append(f"expected 0210, got {describe(got)}")
        else:
            reasons += check_transport(request, got, self.args)
            if got.fields.get("39") != "30":
                reasons.append(f"39 {got.fields.get('39')}, expected 30 (format error)")
            if "38" in got.fields:
                reasons.append("an authorisation code on a format error")
        self.record("0200 without field 4 (expect 30)", card.profile.file, request, got, "30", reasons, [describe(got)], started)

    def run_profile(self, profile):
        args = self.args
        card = Card(profile, args.aid, args.entry_mode)
        print(f"-- {profile.file}: PAN {profile.pan} PSN {profile.psn} AID {card.app.aid} CVN {card.cvn} "
              f"(ARPC method {c.ARPC_METHOD[card.cvn]}) entry mode {card.entry_mode}", flush=True)
        approved_sale = None
        timed_out = []
        for amount in args.amounts:
            expect = expectation(args, profile, amount)
            request, got = self.authorise(card, "0200", amount, "000000", expect, "sale")
            if approved_sale is None and got.kind == "answer" and got.fields.get("39") in c.APPROVAL_CODES:
                approved_sale = (request, got.fields)
            if got.kind == "timeout":
                timed_out.append(request)
        for amount in args.refunds:
            self.authorise(card, "0200", amount, "200000", expectation(args, profile, amount, refund=True), "refund")
        self.authorise(card, "0100", args.preauth_amount, "000000", expectation(args, profile, args.preauth_amount),
                       "pre-authorisation")
        self.authorise(card, "0200", args.tamper_amount, "000000", "decline", "sale, ARQC bit flipped", tamper=True)
        if not args.against_peer_host:
            self.missing_amount(card)
        if approved_sale:
            self.reverse(card, *approved_sale)
        else:
            self.record("0400 reversal", profile.file, None, None, "00", [], ["no approved sale to reverse"],
                        time.monotonic(), skipped=True)
        for request in timed_out:
            self.reverse(card, request, None, advice=True)

    def run(self, profiles):
        self.link.connect()  # EnvironmentNotReady when the host is not there
        self.echo()
        for profile in profiles:
            self.run_profile(profile)
        self.link.drop()


def parse_address(text):
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--connect", type=parse_address, required=True, help="HOST:PORT of the host listener")
    p.add_argument("--spec", choices=sorted(c.SPECS), default="default", help="pyiso8583 spec (default: default)")
    p.add_argument("--framing", choices=c.FRAMINGS, default="binary2", help="default binary2")
    p.add_argument("--profile", action="append", default=[],
                   help="card profile YAML (repeatable; default Scenarios/cards/visa-credit-cvn10.yaml)")
    p.add_argument("--aid", help="application to use (hex); default the profile's highest priority")
    p.add_argument("--entry-mode", choices=("051", "071"),
                   help="field 22 (default 051, or 071 for a contactless-only profile); 071 uses a contactless CVN")
    p.add_argument("--amount", action="append", default=[],
                   help="sale amounts, minor units or with a point, comma-separated, repeatable (default 10.00)")
    p.add_argument("--refund", action="append", default=[], help="refund amounts (processing code 200000)")
    p.add_argument("--preauth-amount", default="25.00", help="the 0100's amount (default 25.00)")
    p.add_argument("--tamper-amount", default="10.03", help="the tampered 0200's amount (default 10.03)")
    p.add_argument("--expect", action="append", default=[], metavar="AMOUNT=CODE",
                   help="expected 39 (or decline, timeout, malformed, script) for an amount; repeatable")
    p.add_argument("--against-peer-host", action="store_true",
                   help="expect iso8583_host.py's amount rules and add its .77/.88/.99/51.00 cases")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for an answer (default 10)")
    p.add_argument("--no-answer-wait", type=float, default=2.0,
                   help="seconds after which an expected timeout counts as one (default 2)")
    p.add_argument("--terminal-id", default="PYTERM01", help="field 41, 8 characters")
    p.add_argument("--merchant-id", default="PYISO8583PEER01", help="field 42, 15 characters")
    p.add_argument("--currency", type=int, default=484, help="field 49 and 5F2A (default 484)")
    p.add_argument("--country", type=int, default=484, help="9F1A (default 484)")
    p.add_argument("--stan-start", type=int, help="first STAN - 1 (default from the clock)")
    p.add_argument("--json-report", help="write the cases and their results as JSON here")
    p.add_argument("-v", "--verbose", action="store_true", help="print every message's fields")
    args = p.parse_args(argv)
    if len(args.terminal_id) != 8 or len(args.merchant_id) != 15:
        p.error("--terminal-id must be 8 characters and --merchant-id 15")
    try:
        amounts = [parse_amount(a) for text in args.amount for a in text.split(",") if a.strip()]
        args.refunds = [parse_amount(a) for text in args.refund for a in text.split(",") if a.strip()]
        args.preauth_amount = parse_amount(args.preauth_amount)
        args.tamper_amount = parse_amount(args.tamper_amount)
        expect = {}
        for item in args.expect:
            amount, _, code = item.partition("=")
            if code not in EXPECT_WORDS and len(code) != 2:
                raise ValueError(f"--expect {item}: CODE is two characters or one of {', '.join(EXPECT_WORDS)}")
            expect[parse_amount(amount)] = code
        args.expect = expect
    except (ValueError, decimal.InvalidOperation) as e:
        p.error(str(e))
    if not amounts:
        amounts = [1000] + ([5100, 1077, 1088, 1099] if args.against_peer_host else [])
    args.amounts = amounts

    paths = args.profile or [os.path.join(c.DEFAULT_CARDS, "visa-credit-cvn10.yaml")]
    try:
        profiles = [c.load_profile(path) for path in paths]
        for profile in profiles:
            profile.application(args.aid)
    except (OSError, c.YamlError, KeyError, ValueError) as e:
        print(f"ENVIRONMENT: profile: {e}", file=sys.stderr)
        return 2

    runner = Runner(args)
    status = 0
    try:
        runner.run(profiles)
    except EnvironmentNotReady as e:
        print(f"ENVIRONMENT: {e}", file=sys.stderr)
        status = 2
    failed = sum(1 for r in runner.results if r["result"] == "FAIL")
    passed = sum(1 for r in runner.results if r["result"] == "PASS")
    skipped = sum(1 for r in runner.results if r["result"] == "SKIP")
    if status == 0:
        status = 1 if failed else 0
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    if args.json_report:
        report = {"connect": "%s:%d" % args.connect, "spec": args.spec, "framing": args.framing,
                  "finished": c.utc_now().isoformat(timespec="seconds"), "passed": passed, "failed": failed,
                  "skipped": skipped, "exit": status, "cases": runner.results}
        with open(args.json_report, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
