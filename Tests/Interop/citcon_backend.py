#!/usr/bin/env python3
"""Citcon UPI merchant-backend check: cardbench's Citcon emulation driven the way a merchant's server would drive
Citcon from its documents (access tokens, charges, inquiry, capture, refund, cancel, IPN with its SHA-256 sign),
with plain `requests` and an IPN receiver of our own. The sign is computed here from the IPN guide's prose, not
taken from cardbench or from Tests/Oracle/citcon_sign.py.

Starts an IPN receiver on 127.0.0.1:--ipn-port (answers 200), runs the checks in order and prints one line for
each: `PASS name` or `FAIL name: why`. A check that needs an earlier check's result fails as skipped when that one
failed. Exit status: 0 all pass; 1 any FAIL; 2 the environment is wrong (requests missing, port not bindable).

    .venv/bin/python Tests/Interop/citcon_backend.py --base http://127.0.0.1:PORT --merchant-key KEY \
        --ipn-port P --pan PAN --expiry MM/YY --cvv CVV [--timeout 20]
"""
import argparse
import hashlib
import hmac
import json
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    import requests
except ImportError as e:  # pragma: no cover - environment
    print(f"ENVIRONMENT: {e}; run {sys.executable} -m pip install -r Tests/Oracle/requirements.txt", file=sys.stderr)
    sys.exit(2)

APP, VERSION = "citcon_upi", "v0.1.1"  # what every real Citcon example answers (not DEV's "citcon-upi"/"v.1.0.0")
HEX32 = re.compile(r"^[0-9a-f]{32}$")  # Citcon ids and charge tokens: dashless UUIDs
ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")  # the IPN guide's example, 2021-08-14T09:47:43.000Z
SHOP = {"success": "https://shop.example/ok", "fail": "https://shop.example/fail",
        "cancel": "https://shop.example/cancel", "mobile": ""}
# The IPN guide's worked example, as the JSON it would arrive as (amount a number, the empty amounts "").
GUIDE_IPN = ('{"id":"84571d30e61711eba6a94911fce35a55","transaction_type":"charge","reference":"reference132",'
             '"amount":100,"currency":"USD","status":"authorized","time_created":"2021-07-16T09:23:44.000Z",'
             '"time_completed":"2021-08-14T09:47:43.000Z","payment_method":"paypal","amount_captured":"",'
             '"amount_refunded":"","fields":"id,transaction_type,reference,amount,currency,status,time_completed,'
             'time_created,payment_method,amount_captured,amount_refunded",'
             '"sign":"621233f017ad8139fe97d47b4653735e121b9f6e7dafe3638eba0fcd80801db5"}')


class Fail(Exception):
    """A check's expectation did not hold."""


def expect(condition, message):
    if not condition:
        raise Fail(message)


# --- IPN signature, from "How to verify UPI IPN signature": the keys named in `fields` plus `fields` itself,
# sorted, joined as k=v with & (nothing URL-encoded, empty values as k=), then &secret=<key>, SHA-256, lower hex.

def sign_text(value):
    """A value as the signer saw it in the JSON. Numbers arrive as their own text (see ipn_sign), so 100 is "100"
    and 1.50 stays "1.50"; null and absent are empty; JSON booleans are true/false, not Python's True/False."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def ipn_sign(body, secret):
    """The sign the IPN raw `body` (bytes or str) should carry, or raise Fail if it is not a signable IPN."""
    values = json.loads(body, parse_int=str, parse_float=str)  # keep each number's exact JSON text
    expect(isinstance(values, dict) and isinstance(values.get("fields"), str), "IPN without a string `fields`")
    keys = sorted({k.strip() for k in values["fields"].split(",") if k.strip()} - {"sign"} | {"fields"})
    text = "&".join(f"{k}={sign_text(values.get(k))}" for k in keys) + "&secret=" + secret
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def ipn_verified(body, secret):
    try:
        claimed = json.loads(body).get("sign")
        return isinstance(claimed, str) and hmac.compare_digest(claimed.lower(), ipn_sign(body, secret))
    except (Fail, ValueError, AttributeError):
        return False


# --- IPN receiver: records every POST's raw body and answers 200 (any 2xx acknowledges)

class Recorder(BaseHTTPRequestHandler):
    received = []  # raw bodies, in arrival order
    arrived = threading.Condition()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with Recorder.arrived:
            Recorder.received.append(body)
            Recorder.arrived.notify_all()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "7")
        self.end_headers()
        self.wfile.write(b"success")

    def log_message(self, *_):  # stdout carries only PASS/FAIL lines
        pass


def ipn_of(body):
    try:
        event = json.loads(body)
    except ValueError:
        return {}
    return event if isinstance(event, dict) else {}


def wait_for_ipn(predicate, timeout):
    """The first recorded IPN body whose JSON satisfies `predicate`, or None after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    with Recorder.arrived:
        while True:
            match = next((b for b in Recorder.received if predicate(ipn_of(b))), None)
            if match or time.monotonic() >= deadline:
                return match
            Recorder.arrived.wait(max(0.0, deadline - time.monotonic()))


# --- the Citcon API as a merchant's server calls it

class Citcon:
    def __init__(self, base, timeout):
        self.base = base.rstrip("/")
        self.http = requests.Session()
        self.timeout = (5, timeout)
        self.seen = []  # (what, body text) of every answer, for the no-full-PAN check

    def send(self, method, path, auth=None, body=None, form=None):
        """One request; `path` may be a full URL (the pages a charge names). `body` is a dict sent as JSON or a
        str sent as is (the malformed-body check); `form` is a dict sent urlencoded, as a browser posts a form.
        Redirects are never followed: the 303 and its Location are what is checked."""
        url = path if path.startswith("http") else self.base + path
        headers = {"Accept": "application/json"}
        if auth is not None:
            headers["Authorization"] = auth
        data = form
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = body if isinstance(body, str) else json.dumps(body)
        answer = self.http.request(method, url, headers=headers, data=data, timeout=self.timeout,
                                   allow_redirects=False)
        self.seen.append((f"{method} {url}", answer.text))
        return answer


def envelope(answer):
    try:
        env = answer.json()
    except ValueError:
        raise Fail(f"HTTP {answer.status_code}, body not JSON: {answer.text[:120]!r}")
    expect(isinstance(env, dict), f"HTTP {answer.status_code}, body not a JSON object")
    expect(env.get("app") == APP and env.get("version") == VERSION,
           f"envelope app {env.get('app')!r} version {env.get('version')!r}, want {APP!r} {VERSION!r}")
    return env


def success(answer):
    """`data` of a success envelope; anything else is a Fail naming the code and message."""
    env = envelope(answer)
    data = env.get("data")
    if not (200 <= answer.status_code < 300 and env.get("status") == "success" and isinstance(data, dict)):
        d = data if isinstance(data, dict) else {}
        raise Fail(f"HTTP {answer.status_code} status {env.get('status')!r} code {d.get('code')!r} "
                   f"message {d.get('message')!r}")
    return data


def failure(answer, http_status, *codes):
    """`data` of a fail envelope with that HTTP status and one of `codes` (4-digit strings)."""
    env = envelope(answer)
    data = env.get("data") if isinstance(env.get("data"), dict) else {}
    expect(answer.status_code == http_status and env.get("status") == "fail" and data.get("code") in codes,
           f"HTTP {answer.status_code} status {env.get('status')!r} code {data.get('code')!r} "
           f"({data.get('message')!r}), want HTTP {http_status} fail code {' or '.join(codes)}")
    expect(isinstance(data.get("message"), str) and data["message"], "fail without a message")
    return data


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for option in ("base", "merchant-key", "pan", "expiry", "cvv"):
        parser.add_argument("--" + option, required=True)
    parser.add_argument("--ipn-port", type=int, required=True)
    parser.add_argument("--timeout", type=int, default=20, help="seconds for each call and for each IPN wait")
    args = parser.parse_args()

    try:
        server = ThreadingHTTPServer(("127.0.0.1", args.ipn_port), Recorder)
    except OSError as e:
        print(f"ENVIRONMENT: cannot bind 127.0.0.1:{args.ipn_port}: {e}", file=sys.stderr)
        return 2
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api, run = Citcon(args.base, args.timeout), uuid.uuid4().hex[:12]
    urls = dict(SHOP, ipn=f"http://127.0.0.1:{args.ipn_port}/citcon/ipn/{run}")
    state, failures, counter = {}, [], iter(range(1, 1000))

    def ref(kind):  # unique per run, so a rerun against the same daemon never trips duplicate detection
        return f"cb-{run}-{kind}-{next(counter)}"

    def check(name, *needs):
        """Runs the decorated check at once and prints its line; `needs` are state keys earlier checks set."""
        def run_check(fn):
            missing = [n for n in needs if n not in state]
            why = f"skipped: needs {', '.join(missing)} from an earlier check" if missing else None
            try:
                if not missing:
                    fn()
            except Fail as e:
                why = str(e)
            except requests.RequestException as e:  # no HTTP answer at all (refused, timeout, bad URL)
                why = f"{type(e).__name__}: {e}"
            except Exception as e:  # an answer of an unexpected shape (KeyError, TypeError, ...)
                why = f"{type(e).__name__}: {e}"
            print(f"FAIL {name}: {' '.join(str(why).split())[:300]}" if why else f"PASS {name}", flush=True)
            if why:
                failures.append(name)
        return run_check

    def bearer():
        return "Bearer " + state["token"]

    def charge(method, amount=1000, auto_capture=False, three_ds=False):
        """POST /v1/charges as the server-side integration builds it; answers (body sent, data received)."""
        payment = {"method": method, "client": ["mobile_native"]}
        if method == "card":
            payment.update(request_3ds=three_ds, data={"pan": args.pan, "expiry": args.expiry, "cvv": args.cvv})
        body = {"transaction": {"reference": ref(method), "amount": amount, "currency": "USD",
                                "country": "US", "auto_capture": auto_capture, "note": "cardbench merchant check"},
                "payment": payment, "urls": urls}
        data = success(api.send("POST", "/v1/charges", bearer(), body))
        t = body["transaction"]
        expect(data.get("object") == "charge", f"object {data.get('object')!r}")
        expect(HEX32.match(str(data.get("id"))) and HEX32.match(str(data.get("charge_token"))),
               f"id {data.get('id')!r} / charge_token {data.get('charge_token')!r} not 32 lowercase hex")
        expect((data.get("reference"), data.get("amount"), data.get("currency"), data.get("country"))
               == (t["reference"], amount, "USD", "US"), f"charge echoes {data.get('reference')!r} "
               f"{data.get('amount')!r} {data.get('currency')!r} {data.get('country')!r}")
        expect(isinstance(data.get("time_created"), int) and data["time_created"] > 10 ** 12,
               f"time_created {data.get('time_created')!r} is not epoch milliseconds")
        expect((data.get("payment") or {}).get("method") == method, f"payment {data.get('payment')!r}")
        return body, data

    def inquire(charge_id):
        data = success(api.send("GET", f"/v1/transactions/{charge_id}", bearer()))
        expect(data.get("id") == charge_id and data.get("object") == "charge", f"inquiry of {charge_id} answered "
               f"id {data.get('id')!r} object {data.get('object')!r}")
        return data

    def status_is(charge_id, want):
        got = inquire(charge_id).get("status")
        expect(got == want, f"inquiry status {got!r}, want {want!r}")

    def first_client(data):
        clients = (data.get("payment") or {}).get("client")
        expect(isinstance(clients, list) and clients and isinstance(clients[0], dict),
               f"payment.client {clients!r}, want a list of {{client, format, method, content}}")
        return clients[0]

    def answer_page(url, form, redirect_to):
        """A cardholder's browser answering the 3DS or wallet page: a 303 back to the shop's URL."""
        page = api.send("POST", url, form=form)
        expect(page.status_code == 303 and page.headers.get("Location") == redirect_to,
               f"{form} answered HTTP {page.status_code} Location {page.headers.get('Location')!r}, want 303 "
               f"to {redirect_to}")

    @check("ipn-sign-guide-example")
    def _():
        want = json.loads(GUIDE_IPN)["sign"]
        expect(ipn_sign(GUIDE_IPN, "braintree") == want, f"{ipn_sign(GUIDE_IPN, 'braintree')}, want {want}")
        expect(not ipn_verified(GUIDE_IPN.replace("reference132", "reference133"), "braintree"),
               "a tampered example still verifies")

    @check("token-bearer")
    def _():
        data = success(api.send("POST", "/v1/access-tokens", "Bearer " + args.merchant_key, {"token_type": "server"}))
        token = data.get("access_token")
        expect(isinstance(token, str) and token.startswith("UPI_"), f"access_token {token!r} not UPI_…")
        expect(data.get("token_type") == "server", f"token_type {data.get('token_type')!r}")
        expect(isinstance(data.get("expiry"), int) and data["expiry"] > time.time() * 1000,
               f"expiry {data.get('expiry')!r} is not a future epoch-milliseconds time")
        expect(isinstance(data.get("permission"), list) and "charge" in data["permission"],
               f"permission {data.get('permission')!r}")
        state["token"] = token

    @check("token-bare-key")
    def _():  # cardbench's leniency: the key without "Bearer " (Citcon's own clients always send the prefix)
        data = success(api.send("POST", "/v1/access-tokens", args.merchant_key, {"token_type": "client"}))
        expect(str(data.get("access_token")).startswith("UPI_") and data.get("token_type") == "client",
               f"access_token {data.get('access_token')!r} token_type {data.get('token_type')!r}")

    @check("token-bad-key")
    def _():
        failure(api.send("POST", "/v1/access-tokens", f"Bearer {args.merchant_key}-not", {"token_type": "server"}),
                401, "4010")

    @check("card-authorized", "token")
    def _():
        body, data = charge("card", 1000)
        expect(data.get("status") == "authorized", f"data.status {data.get('status')!r}, want 'authorized'")
        expect(data.get("amount_captured") in (None, 0), f"amount_captured {data.get('amount_captured')!r}")
        state["charge"], state["charge_ref"] = data["id"], body["transaction"]["reference"]

    @check("card-auto-capture", "token")
    def _():
        _, data = charge("card", 900, auto_capture=True)
        expect(data.get("status") == "succeeded", f"data.status {data.get('status')!r}, want 'succeeded'")

    @check("inquiry", "charge")
    def _():
        data = inquire(state["charge"])
        expect(data.get("status") == "authorized" and data.get("amount") == 1000 and data.get("currency") == "USD"
               and data.get("reference") == state["charge_ref"], f"inquiry {data.get('status')!r} "
               f"{data.get('amount')!r} {data.get('currency')!r} {data.get('reference')!r}")
        card = (data.get("payment") or {}).get("data") or {}
        expect((data.get("payment") or {}).get("method") == "card" and "pan" in card and args.pan not in card["pan"],
               f"payment {data.get('payment')!r}: want method card and a masked or empty pan")
        for part in ("captures", "refunds", "chargebacks"):
            expect(isinstance((data.get(part) or {}).get("data"), list),
                   f"{part} {data.get(part)!r}, want {{data: [...]}}")

    @check("inquiry-unknown-id", "token")
    def _():
        failure(api.send("GET", f"/v1/transactions/{uuid.uuid4().hex}", bearer()), 404, "4103")

    @check("capture-partial", "charge")
    def _():
        reference = ref("capture")
        body = {"transaction_id": state["charge"], "amount": 600, "reference": reference}
        data = success(api.send("POST", "/v1/captures", bearer(), body))
        expect((data.get("object"), data.get("amount"), data.get("reference"), data.get("status"))
               == ("capture", 600, reference, "succeeded"), f"capture answered {data!r}")
        after = inquire(state["charge"])
        expect(after.get("status") == "succeeded" and after.get("amount_captured") == 600,
               f"charge {after.get('status')!r} amount_captured {after.get('amount_captured')!r}, want succeeded 600")
        expect(after.get("time_captured") is not None, "time_captured still null after the capture")
        state["captured"] = state["charge"]

    @check("refund-partial", "captured")
    def _():
        reference = ref("refund")
        body = {"transaction_id": state["captured"], "amount": 200, "reference": reference}
        data = success(api.send("POST", "/v1/refunds", bearer(), body))
        expect((data.get("object"), data.get("amount"), data.get("reference"), data.get("status"))
               == ("refund", 200, reference, "succeeded"), f"refund answered {data!r}")
        after = inquire(state["captured"])
        expect(after.get("amount_refunded") == 200, f"amount_refunded {after.get('amount_refunded')!r}, want 200")
        listed = [(r.get("id"), r.get("amount")) for r in (after.get("refunds") or {}).get("data") or []]
        expect((data.get("id"), 200) in listed, f"refund {data.get('id')} not in refunds.data {listed}")
        state["refund"], state["refund_ref"] = data.get("id"), reference

    @check("refund-beyond-remaining", "refund")
    def _():  # 600 captured, 200 refunded: 400 is left, so 500 must be refused and change nothing
        body = {"transaction_id": state["captured"], "amount": 500, "reference": ref("refund")}
        failure(api.send("POST", "/v1/refunds", bearer(), body), 400, "4000", "4208")
        left = inquire(state["captured"]).get("amount_refunded")
        expect(left == 200, f"amount_refunded {left!r} after the refused refund, want 200")

    @check("refund-reference-used-before", "refund")
    def _():  # the merchant resends its refund under the same reference: duplicate request, nothing refunded again
        body = {"transaction_id": state["captured"], "amount": 100, "reference": state["refund_ref"]}
        failure(api.send("POST", "/v1/refunds", bearer(), body), 400, "4100")
        left = inquire(state["captured"]).get("amount_refunded")
        expect(left == 200, f"amount_refunded {left!r} after the repeated reference, want 200")

    @check("ipn-charge-signed", "captured")
    def _():  # Citcon says the IPN, not the API answer, is the payment's final result: verify it as a merchant must
        cid = state["charge"]
        for wanted in (("authorized",), ("captured", "success")):
            body = wait_for_ipn(lambda e: e.get("id") == cid and e.get("status") in wanted, args.timeout)
            got = [(e.get("transaction_type"), e.get("status")) for e in map(ipn_of, Recorder.received)
                   if e.get("id") == cid]
            expect(body, f"no {'/'.join(wanted)} IPN for {cid} within {args.timeout}s; got {got}")
            expect(ipn_verified(body, args.merchant_key),
                   f"{wanted[0]} IPN sign does not verify: {body.decode(errors='replace')}")
            ipn = ipn_of(body)
            expect((ipn.get("transaction_type"), ipn.get("reference"), str(ipn.get("amount")), ipn.get("currency"),
                    ipn.get("payment_method")) == ("charge", state["charge_ref"], "1000", "USD", "card"),
                   f"IPN fields {ipn!r}")
            expect(all(ISO_MS.match(str(ipn.get(k))) for k in ("time_created", "time_completed")),
                   f"IPN times {ipn.get('time_created')!r} {ipn.get('time_completed')!r}, "
                   "want the 2021-08-14T09:47:43.000Z form")

    @check("ipn-refund-signed", "refund")
    def _():
        body = wait_for_ipn(lambda e: e.get("transaction_type") == "refund" and
                            (e.get("id") == state["refund"] or e.get("reference") == state["refund_ref"]),
                            args.timeout)
        expect(body, f"no refund IPN for {state['refund']} within {args.timeout}s")
        ipn = ipn_of(body)
        expect(ipn.get("status") == "success" and str(ipn.get("amount")) == "200", f"refund IPN {ipn!r}")
        expect(ipn_verified(body, args.merchant_key),
               f"refund IPN sign does not verify: {body.decode(errors='replace')}")

    def three_ds(result, redirect, final):
        body, data = charge("card", 1500, three_ds=True)
        expect(data.get("status") == "pending", f"data.status {data.get('status')!r}, want 'pending' (challenge)")
        client = first_client(data)
        expect((client.get("client"), client.get("format"), client.get("method"))
               == ("mobile_native", "redirect", "card") and str(client.get("content")).endswith(
                   f"/citcon/3ds/{data['id']}"), f"payment.client[0] {client!r}, want a redirect to the 3DS page")
        answer_page(client["content"], {"result": result}, urls[redirect])
        status_is(data["id"], final)
        state[f"3ds-{result}"] = data["id"]

    @check("card-3ds-pass", "token")
    def _():
        three_ds("pass", "success", "authorized")

    @check("card-3ds-fail", "token")
    def _():
        three_ds("fail", "fail", "failed")

    def wallet(method, action, redirect, final, keys=None):
        """A wallet charge answered on its wallet page; `keys`: the JSON the app SDK gets in client[0].content."""
        _, data = charge(method, 800)
        expect(data.get("status") == "pending", f"data.status {data.get('status')!r}, want 'pending'")
        client = first_client(data)
        page = f"{api.base}/citcon/wallet/{data['id']}"
        if keys:  # an app SDK (WeChat, Alipay, UnionPay) starts from this JSON, not from a page
            content = json.loads(client.get("content") or "null")
            expect(isinstance(content, dict) and keys <= set(content),
                   f"content {client.get('content')!r} lacks {sorted(keys - set(content or {}))}")
            if method == "wechatpay":
                expect(content["package"] == "Sign=WXPay", f"package {content['package']!r}")
        else:
            expect(client.get("format") == "redirect"
                   and str(client.get("content")).endswith(f"/citcon/wallet/{data['id']}"),
                   f"payment.client[0] {client!r}, want a redirect to the wallet page")
            page = client["content"]
        answer_page(page, {"action": action}, urls[redirect])
        status_is(data["id"], final)
        state[f"{method}-{action}"] = data["id"]

    @check("wallet-wechatpay-approve", "token")
    def _():
        wallet("wechatpay", "approve", "success", "succeeded",
               {"appid", "partnerid", "prepayid", "package", "noncestr", "timestamp", "sign"})

    @check("wallet-alipay-decline", "token")
    def _():
        wallet("alipay", "decline", "fail", "failed", {"signedString", "orderSpec"})

    @check("wallet-upop-approve", "token")
    def _():
        wallet("upop", "approve", "success", "succeeded", {"tn"})

    @check("wallet-paypal-cancel", "token")
    def _():
        wallet("paypal", "cancel", "cancel", "canceled")

    @check("wallet-toss-expire", "token")
    def _():
        wallet("toss", "expire", "fail", "expired")

    @check("duplicate-reference", "token")
    def _():
        body, _ = charge("card", 300)  # then the merchant's retry of the very same request
        failure(api.send("POST", "/v1/charges", bearer(), body), 400, "4100")

    @check("malformed-json", "token")
    def _():
        failure(api.send("POST", "/v1/charges", bearer(), '{"transaction": {"reference": "x", '), 400, "4000")

    @check("missing-amount", "token")
    def _():
        body = {"transaction": {"reference": ref("noamount"), "currency": "USD", "country": "US"},
                "payment": {"method": "wechatpay", "client": ["mobile_native"]}, "urls": urls}
        data = failure(api.send("POST", "/v1/charges", bearer(), body), 400, "4000")
        expect("amount" in data["message"], f"message {data['message']!r} does not name transaction.amount")

    @check("missing-country", "token")
    def _():  # CPayTransaction: "country String Required"
        body = {"transaction": {"reference": ref("nocountry"), "amount": 100, "currency": "USD"},
                "payment": {"method": "wechatpay", "client": ["mobile_native"]}, "urls": urls}
        data = failure(api.send("POST", "/v1/charges", bearer(), body), 400, "4000")
        expect("country" in data["message"], f"message {data['message']!r} does not name transaction.country")

    @check("bad-access-token")
    def _():
        body = {"transaction": {"reference": ref("badtoken"), "amount": 100, "currency": "USD", "country": "US"},
                "payment": {"method": "wechatpay", "client": ["mobile_native"]}, "urls": urls}
        failure(api.send("POST", "/v1/charges", "Bearer UPI_" + uuid.uuid4().hex, body), 401, "4010")

    @check("cancel-authorized", "token")
    def _():
        _, data = charge("card", 700)
        expect(data.get("status") == "authorized", f"data.status {data.get('status')!r}, want 'authorized'")
        success(api.send("POST", "/v1/cancels", bearer(), {"transaction_id": data["id"], "reference": ref("cancel")}))
        status_is(data["id"], "canceled")
        state["canceled"] = data["id"]

    @check("ipn-outcomes")
    def _():  # "every status change" sends an IPN, in the guide's words (cancelled, fail, success), all signed
        wanted = {"canceled": "cancelled", "3ds-fail": "fail", "wechatpay-approve": "success", "alipay-decline": "fail"}
        missing = [k for k in wanted if k not in state]
        expect(not missing, f"skipped: needs {', '.join(missing)} from an earlier check")
        for key, status in wanted.items():
            body = wait_for_ipn(lambda e: e.get("id") == state[key] and e.get("status") == status, args.timeout)
            expect(body, f"no {status!r} IPN for the {key} charge {state[key]} within {args.timeout}s")
        bad = [ipn_of(b).get("id") for b in list(Recorder.received) if not ipn_verified(b, args.merchant_key)]
        expect(not bad, f"{len(bad)} of {len(Recorder.received)} IPNs do not verify (ids {bad[:5]})")

    @check("no-full-pan")
    def _():  # the card number may go in, never come back out: API answers, pages and IPNs alike
        leaks = list(dict.fromkeys(what for what, text in api.seen if args.pan in text))
        leaks += ["IPN " + str(ipn_of(b).get("id")) for b in list(Recorder.received) if args.pan.encode() in b]
        expect(not leaks, f"full PAN in {leaks[:5]}")
        expect(api.seen, "no answer was received at all")

    server.shutdown()
    server.server_close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
