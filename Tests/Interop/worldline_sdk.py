#!/usr/bin/env python3
"""Worldline Online Payments interoperability check: cardbench's emulation driven by the official Python server
SDK (onlinepayments-sdk-python3 10.3.0), with an encryptedCustomerInput built byte for byte as Worldline's
JavaScript client SDK builds it (sdk-client-js src/utils/JOSEEncryptor.ts and src/Encryptor.ts).

Starts a webhook receiver on 127.0.0.1:--webhook-port, runs the checks in order and prints one line for each:
`PASS name` or `FAIL name: why`. A check that needs an earlier check's payment fails as skipped when that one
failed. Exit status: 0 all pass; 1 any FAIL; 2 the environment is wrong (SDK or cryptography not importable,
port not bindable, endpoint unusable).

    .venv/bin/python Tests/Interop/worldline_sdk.py --endpoint http://127.0.0.1:PORT --merchant M --key-id K \
        --secret S --webhook-key-id WK --webhook-secret WS --webhook-port P --pan PAN --expiry MMYY --cvv CVV \
        [--timeout 20]
"""
import argparse
import base64
import datetime
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    from cryptography.hazmat.primitives import hashes, hmac, padding
    from cryptography.hazmat.primitives.asymmetric import padding as rsa_padding, rsa
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.serialization import load_der_public_key
    from onlinepayments.sdk.api_exception import ApiException
    from onlinepayments.sdk.validation_exception import ValidationException
    from onlinepayments.sdk.call_context import CallContext
    from onlinepayments.sdk.communication.communication_exception import CommunicationException
    from onlinepayments.sdk.communication.not_found_exception import NotFoundException
    from onlinepayments.sdk.communication.request_header import RequestHeader
    from onlinepayments.sdk.communicator_configuration import CommunicatorConfiguration
    from onlinepayments.sdk.declined_payment_exception import DeclinedPaymentException
    from onlinepayments.sdk.domain.amount_of_money import AmountOfMoney
    from onlinepayments.sdk.domain.cancel_payment_request import CancelPaymentRequest
    from onlinepayments.sdk.domain.capture_payment_request import CapturePaymentRequest
    from onlinepayments.sdk.domain.card import Card
    from onlinepayments.sdk.domain.card_payment_method_specific_input import CardPaymentMethodSpecificInput
    from onlinepayments.sdk.domain.card_recurrence_details import CardRecurrenceDetails
    from onlinepayments.sdk.domain.card_without_cvv import CardWithoutCvv
    from onlinepayments.sdk.domain.create_payment_request import CreatePaymentRequest
    from onlinepayments.sdk.domain.create_token_request import CreateTokenRequest
    from onlinepayments.sdk.domain.decrypted_payment_data import DecryptedPaymentData
    from onlinepayments.sdk.domain.redirect_payment_method_specific_input import RedirectPaymentMethodSpecificInput
    from onlinepayments.sdk.domain.redirection_data import RedirectionData
    from onlinepayments.sdk.domain.mobile_payment_method_specific_input import MobilePaymentMethodSpecificInput
    from onlinepayments.sdk.domain.create_hosted_checkout_request import CreateHostedCheckoutRequest
    from onlinepayments.sdk.domain.create_hosted_tokenization_request import CreateHostedTokenizationRequest
    from onlinepayments.sdk.domain.hosted_checkout_specific_input import HostedCheckoutSpecificInput
    from onlinepayments.sdk.domain.card_payment_method_specific_input_base import CardPaymentMethodSpecificInputBase
    from onlinepayments.sdk.domain.order_references import OrderReferences
    from onlinepayments.sdk.domain.token_card_specific_input import TokenCardSpecificInput
    from onlinepayments.sdk.domain.token_data import TokenData
    from onlinepayments.sdk.domain.get_iin_details_request import GetIINDetailsRequest
    from onlinepayments.sdk.domain.order import Order
    from onlinepayments.sdk.domain.refund_request import RefundRequest
    from onlinepayments.sdk.domain.session_request import SessionRequest
    from onlinepayments.sdk.factory import Factory
    from onlinepayments.sdk.json.default_marshaller import DefaultMarshaller
    from onlinepayments.sdk.merchant.products.get_payment_products_params import GetPaymentProductsParams
    from onlinepayments.sdk.webhooks.in_memory_secret_key_store import InMemorySecretKeyStore
    from onlinepayments.sdk.webhooks.signature_validation_exception import SignatureValidationException
    from onlinepayments.sdk.webhooks.webhooks_helper import WebhooksHelper
except ImportError as e:  # pragma: no cover - environment
    print(f"ENVIRONMENT: {e}; run {sys.executable} -m pip install -r Tests/Oracle/requirements.txt", file=sys.stderr)
    sys.exit(2)

CURRENCY, AMOUNT = "EUR", 1000
DECLINE_AMOUNT = 1302  # Worldline's published test amount: a SALE of 1302 is declined (status code 2)
CARDHOLDER = "Cardbench Interop"  # ASCII: the JS SDK hands the JSON to AES as a "raw" node-forge string


def environment_error(message):
    print(f"ENVIRONMENT: {message}", file=sys.stderr)
    sys.exit(2)


class Fail(Exception):
    """A check's expectation did not hold."""


def expect(condition, message):
    if not condition:
        raise Fail(message)


def product_id(pan):
    """Worldline's payment product for the PAN's brand: 1 Visa, 2 American Express, 3 Mastercard."""
    return 1 if pan.startswith("4") else 2 if pan[:2] in ("34", "37") else 3


# --- encryptedCustomerInput (client side)

def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def encrypt_customer_input(key_id, public_key_b64, payload):
    """JWE compact: RSA-OAEP (SHA-1, MGF1-SHA1) wraps a 64-byte CEK = MAC key (32) ‖ AES key (32); AES-256-CBC
    with PKCS7; tag = first 32 bytes of HMAC-SHA512(AAD ‖ IV ‖ ciphertext ‖ AL), AAD = the encoded header."""
    public_key = load_der_public_key(base64.b64decode(public_key_b64))
    expect(isinstance(public_key, rsa.RSAPublicKey) and public_key.key_size == 2048,
           f"public key is not RSA-2048: {type(public_key).__name__}")
    header = b64url(json.dumps({"alg": "RSA-OAEP", "enc": "A256CBC-HS512", "kid": key_id},
                               separators=(",", ":")).encode())  # JSON.stringify: no spaces, this key order
    cek, iv = os.urandom(64), os.urandom(16)
    mac_key, enc_key = cek[:32], cek[32:]
    wrapped = public_key.encrypt(cek, rsa_padding.OAEP(rsa_padding.MGF1(hashes.SHA1()), hashes.SHA1(), None))
    padder = padding.PKCS7(128).padder()
    padded = padder.update(json.dumps(payload, separators=(",", ":")).encode()) + padder.finalize()
    encryptor = Cipher(algorithms.AES(enc_key), modes.CBC(iv)).encryptor()
    ciphertext = encryptor.update(padded) + encryptor.finalize()
    aad = header.encode("ascii")
    mac = hmac.HMAC(mac_key, hashes.SHA512())
    mac.update(aad + iv + ciphertext + (len(aad) * 8).to_bytes(8, "big"))
    return ".".join([header, b64url(wrapped), b64url(iv), b64url(ciphertext), b64url(mac.finalize()[:32])])


def customer_input(client_session_id, args):
    """The object the JS SDK encrypts, in its key order; its device data comes from Util.collectDeviceInformation
    (numbers, nested in browserData), its nonce is 16 random bytes in hex."""
    utc_offset = datetime.datetime.now().astimezone().utcoffset()
    return {
        "clientSessionId": client_session_id,
        "nonce": os.urandom(16).hex(),
        "paymentProductId": product_id(args.pan),
        "tokenize": False,
        "collectedDeviceInformation": {
            "timezoneOffsetUtcMinutes": -int(utc_offset.total_seconds() // 60),  # as JS Date.getTimezoneOffset()
            "locale": "en-GB",
            "browserData": {"javaScriptEnabled": True, "colorDepth": 24, "screenHeight": 1080, "screenWidth": 1920,
                            "innerHeight": 947, "innerWidth": 1920}},
        "paymentValues": [{"key": "cardNumber", "value": args.pan}, {"key": "expiryDate", "value": args.expiry},
                          {"key": "cvv", "value": args.cvv}, {"key": "cardholderName", "value": CARDHOLDER}],
    }


def client_api_get(session, path, timeout):
    """A Client API GET as the JS SDK makes it: {clientApiUrl}/v1/{customerId}/{path}, session authorization."""
    url = "/".join(s.strip("/") for s in (session.client_api_url, "v1", session.customer_id, path))
    meta = {"screenSize": "1920x947", "platformIdentifier": "cardbench-interop",
            "sdkIdentifier": "JavaScriptClientSDK/v3.6.2", "sdkCreator": "OnlinePayments"}
    request = urllib.request.Request(url, headers={
        "Authorization": f"GCS v1Client:{session.client_session_id}",
        "X-GCS-ClientMetaInfo": base64.b64encode(json.dumps(meta).encode()).decode()})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.load(response)
    except urllib.error.HTTPError as e:
        raise Fail(f"GET {url}: HTTP {e.code} {e.read()[:200]!r}") from None


# --- server API requests (the SDK's own domain objects) and what the checks compare

def money(amount):
    result = AmountOfMoney()
    result.amount, result.currency_code = amount, CURRENCY
    return result


def payment_request(args, amount, mode, cvv=None, encrypted=None, pan=None, return_url=None):
    """A plain card payment, or with `encrypted` the card comes from the encryptedCustomerInput;
    `pan` another card than the bench's (the platform's test cards), `return_url` as the SDK's own
    integration tests send it (cardPaymentMethodSpecificInput.returnUrl)."""
    request, order, card_input = CreatePaymentRequest(), Order(), CardPaymentMethodSpecificInput()
    order.amount_of_money = money(amount)
    card_input.authorization_mode, card_input.payment_product_id = mode, product_id(pan or args.pan)
    if return_url:
        card_input.return_url = return_url
    if encrypted:
        request.encrypted_customer_input = encrypted
    else:
        card_input.card = card = Card()
        card.card_number, card.expiry_date, card.cvv = pan or args.pan, args.expiry, cvv or args.cvv
        card.cardholder_name = CARDHOLDER
    request.order, request.card_payment_method_specific_input = order, card_input
    return request


def settled(get, want, timeout):
    """Polls `get()` until its (status, statusCode) is `want` (a capture or refund settles after
    the call that requested it), failing at the timeout."""
    deadline = time.monotonic() + timeout
    while (status := status_of(get())) != want:
        expect(time.monotonic() < deadline, f"payment {status} {timeout}s later, want {want}")
        time.sleep(0.2)


def not_allowed(call):
    """The platform's refusal of an operation the payment does not allow: 400, errors[0].id and
    .message both ACTION_NOT_ALLOWED_ON_TRANSACTION (the SDK's own tests compare the message)."""
    try:
        call()
    except ValidationException as e:
        got = [(x.id, x.message) for x in e.errors]
        expect(e.status_code == 400 and got[:1] == [("ACTION_NOT_ALLOWED_ON_TRANSACTION",) * 2],
               f"HTTP {e.status_code} {got}, want 400 ACTION_NOT_ALLOWED_ON_TRANSACTION as id and message")
        return
    raise Fail("the operation was accepted")


def status_of(payment):
    """(status, statusOutput.statusCode) of a payment, capture or refund."""
    if payment is None:
        return None
    return payment.status, payment.status_output.status_code if payment.status_output else None


# --- webhook receiver: records every POST (raw body and headers, as the helper needs them) and answers 200

class Recorder(BaseHTTPRequestHandler):
    received = []  # (path, [(header, value)], body bytes), in arrival order
    arrived = threading.Condition()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with Recorder.arrived:
            Recorder.received.append((self.path, list(self.headers.items()), body))
            Recorder.arrived.notify_all()
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_):  # stdout carries only PASS/FAIL lines
        pass


def event_of(body):
    try:
        event = json.loads(body)
    except ValueError:
        return {}
    return event if isinstance(event, dict) else {}


def wait_for_webhook(predicate, timeout):
    """The first recorded POST whose JSON satisfies `predicate` (or None at the timeout), and all received so far."""
    deadline = time.monotonic() + timeout
    with Recorder.arrived:
        while True:
            match = next((r for r in Recorder.received if predicate(event_of(r[2]))), None)
            if match or time.monotonic() >= deadline:
                return match, list(Recorder.received)
            Recorder.arrived.wait(deadline - time.monotonic())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for option in ("endpoint", "merchant", "key-id", "secret", "webhook-key-id", "webhook-secret", "pan", "expiry",
                   "cvv"):
        parser.add_argument("--" + option, required=True)
    parser.add_argument("--webhook-port", type=int, required=True)
    parser.add_argument("--timeout", type=int, default=20, help="seconds for each call and for the webhook wait")
    parser.add_argument("--wallet-data", help="POST /v1/worldline/wallet-data's answer for the card, 10.00 EUR: the mobile-wallet check pays with it")
    args = parser.parse_args()

    try:
        server = ThreadingHTTPServer(("127.0.0.1", args.webhook_port), Recorder)
    except OSError as e:
        environment_error(f"cannot bind 127.0.0.1:{args.webhook_port}: {e}")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = Factory.create_client_from_configuration(CommunicatorConfiguration(
            api_endpoint=args.endpoint.rstrip("/"), api_key_id=args.key_id, secret_api_key=args.secret,
            authorization_type="v1HMAC", connect_timeout=5, socket_timeout=args.timeout, max_connections=4,
            integrator="cardbench-interop"))
    except ValueError as e:  # e.g. an endpoint with a path: the SDK refuses it
        environment_error(f"unusable SDK configuration: {e}")
    merchant = client.merchant(args.merchant)
    payments = merchant.payments()
    state, failures = {}, []

    def check(name, *needs):
        """Runs the decorated check at once and prints its line; `needs` are state keys earlier checks set."""
        def run(fn):
            missing = [n for n in needs if n not in state]
            why = f"skipped: needs {', '.join(missing)} from an earlier check" if missing else None
            try:
                if not missing:
                    fn()
            except Fail as e:
                why = str(e)
            except DeclinedPaymentException as e:
                result = e.create_payment_response
                why = f"declined: HTTP {e.status_code} {status_of(result.payment) if result else e.response_body}"
            except ApiException as e:  # Validation/Authorization/Reference/Idempotence/PlatformException...
                errors = "; ".join(f"{x.error_code} {x.message}" for x in e.errors)
                why = f"{type(e).__name__} HTTP {e.status_code}: {errors or e.response_body}"
            except (CommunicationException, NotFoundException) as e:  # no HTTP answer, or an answer that is not JSON
                why = f"{type(e).__name__}: {e.cause}"
            except Exception as e:  # the SDK's parse errors too (MarshallerSyntaxException, TypeError, ValueError)
                why = f"{type(e).__name__}: {e}"
            print(f"FAIL {name}: {' '.join(str(why).split())[:300]}" if why else f"PASS {name}", flush=True)
            if why:
                failures.append(name)
        return run

    @check("test-connection")
    def _():
        result = merchant.services().test_connection().result
        expect(result == "OK", f"result {result!r}")

    @check("encrypted-payment")
    def _():
        session = merchant.sessions().create_session(SessionRequest())
        expect(session.client_session_id and session.customer_id and session.client_api_url,
               f"incomplete session {session.to_dictionary()}")
        key = client_api_get(session, "crypto/publickey", args.timeout)
        blob = encrypt_customer_input(key["keyId"], key["publicKey"], customer_input(session.client_session_id, args))
        payment = payments.create_payment(payment_request(args, AMOUNT, "FINAL_AUTHORIZATION", encrypted=blob)).payment
        expect(status_of(payment) == ("PENDING_CAPTURE", 5), f"status {status_of(payment)}, want PENDING_CAPTURE/5")
        output = payment.payment_output and payment.payment_output.card_payment_method_specific_output
        masked = output and output.card and output.card.card_number
        expect(masked and args.pan not in masked, f"masked card number {masked!r}")
        expect(output.card.expiry_date in (None, args.expiry), f"expiryDate {output.card.expiry_date!r}")
        state["payment"] = payment.id

    @check("get-payment", "payment")
    def _():
        payment, details = payments.get_payment(state["payment"]), payments.get_payment_details(state["payment"])
        for what, found in (("get", payment), ("details", details)):
            expect(found.id == state["payment"] and status_of(found) == ("PENDING_CAPTURE", 5),
                   f"{what}: {found.id} {status_of(found)}")

    @check("capture", "payment")
    def _():
        request = CapturePaymentRequest()
        request.amount, request.is_final = AMOUNT, True
        capture = payments.capture_payment(state["payment"], request)
        expect(status_of(capture) == ("CAPTURE_REQUESTED", 91), f"capture response {status_of(capture)}, want CAPTURE_REQUESTED/91")
        settled(lambda: payments.get_payment(state["payment"]), ("CAPTURED", 9), args.timeout)
        captures = merchant.captures().get_captures(state["payment"]).captures or []
        expect(len(captures) == 1, f"{len(captures)} captures listed, want 1")
        state["captured"] = state["payment"]

    @check("refund", "captured")
    def _():
        request = RefundRequest()
        request.amount_of_money = money(AMOUNT)
        refund = payments.refund_payment(state["captured"], request)
        expect(refund.id, f"refund response without an id: {status_of(refund)}")
        expect(status_of(refund) == ("REFUND_REQUESTED", 81), f"refund response {status_of(refund)}, want REFUND_REQUESTED/81")
        listed = [r.id for r in merchant.refunds().get_refunds(state["captured"]).refunds or []]
        expect(refund.id in listed, f"refund {refund.id} not in {listed}")
        settled(lambda: payments.get_payment(state["captured"]), ("REFUNDED", 8), args.timeout)
        not_allowed(lambda: payments.refund_payment(state["captured"], request))  # the SDK tests' refund_payment_already_refunded

    def capture(pid, amount, final):
        request = CapturePaymentRequest()
        request.amount, request.is_final = amount, final
        return payments.capture_payment(pid, request)

    def pre_authorisation(amount):
        payment = payments.create_payment(payment_request(args, amount, "PRE_AUTHORIZATION")).payment
        expect(status_of(payment) == ("PENDING_CAPTURE", 5), f"pre-authorization {status_of(payment)}")
        return payment.id

    @check("partial-capture-not-final")
    def _():  # the SDK tests' capture_payment_remaining_amount and second_amount_exceeds_remaining
        pid = pre_authorisation(1000)
        capture(pid, 400, False)
        try:
            capture(pid, 700, False)
            raise Fail("a capture beyond what is left was accepted")
        except ValidationException:
            pass
        capture(pid, 600, True)
        settled(lambda: payments.get_payment(pid), ("CAPTURED", 9), args.timeout)
        not_allowed(lambda: capture(pid, 1, True))

    @check("partial-cancel")
    def _():  # the SDK tests' capture_payment_after_partial_cancel
        pid = pre_authorisation(800)
        request = CancelPaymentRequest()
        request.amount_of_money, request.is_final = money(600), False
        cancelled = payments.cancel_payment(pid, request).payment
        expect(cancelled.status == "CANCELLED", f"cancel response {status_of(cancelled)}, want CANCELLED")
        capture(pid, 200, True)
        settled(lambda: payments.get_payment(pid), ("CAPTURED", 9), args.timeout)

    @check("refund-above-captured")
    def _():  # the SDK tests' refund_payment_single_refund_exceeds_captured and total_exceeds_captured
        pid = pre_authorisation(800)
        capture(pid, 300, True)
        request = RefundRequest()
        request.amount_of_money = money(600)
        not_allowed(lambda: payments.refund_payment(pid, request))
        request.amount_of_money = money(200)
        payments.refund_payment(pid, request)
        not_allowed(lambda: payments.refund_payment(pid, request))  # 200 + 200 > 300

    @check("declined-test-card")
    def _():  # the SDK tests' create_payment_declined_card
        try:
            payment = payments.create_payment(payment_request(args, AMOUNT, "FINAL_AUTHORIZATION", pan="4321456998744563")).payment
            raise Fail(f"approved: {payment.id} {status_of(payment)}")
        except DeclinedPaymentException as e:
            result = e.create_payment_response
            expect(e.status_code >= 400 and result and result.payment and result.payment.id, f"HTTP {e.status_code}, paymentResult {result}")
            expect(result.payment.status == "REJECTED", f"status {status_of(result.payment)}, want REJECTED")

    @check("frictionless-test-card")
    def _():  # the request every payment test of the SDK's suite makes: 4012000033330026 with a returnUrl, then a capture
        request = payment_request(args, AMOUNT, "FINAL_AUTHORIZATION", pan="4012000033330026", return_url="https://example.com/return")
        payment = payments.create_payment(request).payment
        expect(status_of(payment) == ("PENDING_CAPTURE", 5), f"status {status_of(payment)}, want PENDING_CAPTURE/5 (frictionless)")
        capture(payment.id, AMOUNT, True)

    @check("cancel")
    def _():
        payment = payments.create_payment(payment_request(args, AMOUNT, "PRE_AUTHORIZATION")).payment
        expect(status_of(payment) == ("PENDING_CAPTURE", 5), f"pre-authorization {status_of(payment)}")
        cancelled = payments.cancel_payment(payment.id, CancelPaymentRequest()).payment
        expect(status_of(cancelled) == ("CANCELLED", 6), f"cancel response {status_of(cancelled)}, want CANCELLED/6 (cancelled by the merchant)")
        expect(status_of(payments.get_payment(payment.id)) == ("CANCELLED", 6), "payment not CANCELLED/6 (cancelled by the merchant) on get")

    @check("decline-1302")
    def _():
        try:
            payment = payments.create_payment(payment_request(args, DECLINE_AMOUNT, "SALE")).payment
            raise Fail(f"approved: {payment.id} {status_of(payment)}")
        except DeclinedPaymentException as e:
            result = e.create_payment_response
            expect(e.status_code == 402 and result and result.payment, f"HTTP {e.status_code}, paymentResult {result}")
            expect(status_of(result.payment) == ("REJECTED", 2), f"status {status_of(result.payment)}, want REJECTED/2")

    @check("idempotent-replay")
    def _():
        key, request = str(uuid.uuid4()), payment_request(args, AMOUNT, "FINAL_AUTHORIZATION")
        first = payments.create_payment(request, CallContext(idempotence_key=key)).payment
        replay_context = CallContext(idempotence_key=key)
        replay = payments.create_payment(request, replay_context).payment
        expect(first.id == replay.id, f"the replay created {replay.id}, the first call {first.id}")
        expect(replay_context.idempotence_request_timestamp is not None,
               "the replay's response had no X-GCS-Idempotence-Request-Timestamp")
        other = payments.create_payment(request, CallContext(idempotence_key=str(uuid.uuid4()))).payment
        expect(other.id != first.id, f"a new idempotence key returned the same payment {other.id}")

    @check("webhook-captured", "captured")
    def _():
        pid = state["captured"]
        record, received = wait_for_webhook(
            lambda event: event.get("type") == "payment.captured" and (event.get("payment") or {}).get("id") == pid,
            args.timeout)
        types = [event_of(body).get("type") for _, _, body in received]
        expect(record, f"no payment.captured for {pid} within {args.timeout}s; received {types}")
        store = InMemorySecretKeyStore.instance()
        store.store_secret_key(args.webhook_key_id, args.webhook_secret)
        helper = WebhooksHelper(DefaultMarshaller.instance(), store)
        _, headers, body = record
        event = helper.unmarshal(body, [RequestHeader(n, v) for n, v in headers])  # signature, then apiVersion
        expect(event.merchant_id == args.merchant and event.payment.id == pid and event.id,
               f"event merchantId {event.merchant_id!r}, payment {event.payment.id!r}, id {event.id!r}")
        try:
            helper.unmarshal(body.replace(pid.encode(), pid.encode() + b"0"), [RequestHeader(n, v) for n, v in headers])
            raise Fail("the helper accepted a tampered body")
        except SignatureValidationException:
            pass
        for _, headers, body in received:  # every webhook so far must pass the SDK's checks, not only this one
            try:
                helper.unmarshal(body, [RequestHeader(n, v) for n, v in headers])
            except Exception as e:
                raise Fail(f"{event_of(body).get('type')} webhook rejected by the SDK: {type(e).__name__}: {e}")

    @check("wrong-cvv-declined")
    def _():
        wrong = "000" if args.cvv != "000" else "999"
        try:
            payment = payments.create_payment(payment_request(args, AMOUNT, "FINAL_AUTHORIZATION", cvv=wrong)).payment
            raise Fail(f"approved with CVV {wrong}: {payment.id} {status_of(payment)}")
        except DeclinedPaymentException:
            pass

    @check("iin-details")
    def _():
        request = GetIINDetailsRequest()
        request.bin = args.pan[:6]
        details = merchant.services().get_iin_details(request)
        found = details.payment_product_id
        expect(found == product_id(args.pan), f"paymentProductId {found}, want {product_id(args.pan)}")
        expect(details.card_type in ("Credit", "Debit", "Prepaid") and details.card_scheme,
               f"cardType {details.card_type!r}, cardScheme {details.card_scheme!r}")

    @check("products")
    def _():
        query = GetPaymentProductsParams()
        query.country_code, query.currency_code = "BE", CURRENCY
        ids = [p.id for p in merchant.products().get_payment_products(query).payment_products or []]
        expect(product_id(args.pan) in ids, f"product {product_id(args.pan)} not in {ids}")
        try:
            merchant.products().get_payment_products(GetPaymentProductsParams())
            raise Fail("products without countryCode answered")
        except ValidationException as e:
            expect(e.status_code == 400, f"HTTP {e.status_code}, want 400")

    @check("session-invalid-tokens")
    def _():
        request = SessionRequest()
        request.tokens = ["unknown-token-1", "unknown-token-2"]
        session = merchant.sessions().create_session(request)
        expect(sorted(session.invalid_tokens or []) == request.tokens, f"invalidTokens {session.invalid_tokens!r}")
        request.tokens = [f"t{i}" for i in range(11)]
        try:
            merchant.sessions().create_session(request)
            raise Fail("a session with 11 tokens was created")
        except ValidationException as e:
            expect(e.status_code == 400, f"HTTP {e.status_code}, want 400")

    # --- tokens and card on file (docs/worldline.md, "Tokens and card on file")

    def token_payment(token, amount, requestor=None, sequence=None, recurring=None):
        request, order, card_input = CreatePaymentRequest(), Order(), CardPaymentMethodSpecificInput()
        order.amount_of_money = money(amount)
        card_input.authorization_mode, card_input.token = "SALE", token
        card_input.unscheduled_card_on_file_requestor = requestor
        card_input.unscheduled_card_on_file_sequence_indicator = sequence
        if recurring:
            card_input.recurring = CardRecurrenceDetails()
            card_input.recurring.recurring_payment_sequence_indicator = recurring
        request.order, request.card_payment_method_specific_input = order, card_input
        return request

    @check("token-create-get")
    def _():
        request, data, card = CreateTokenRequest(), TokenData(), Card()
        card.card_number, card.expiry_date, card.cardholder_name = args.pan, args.expiry, CARDHOLDER
        data.card = card
        request.card, request.payment_product_id = TokenCardSpecificInput(), product_id(args.pan)
        request.card.data = data
        created = merchant.tokens().create_token(request)
        expect(created.token and created.token_status in ("CREATED", "UNCHANGED"), f"created {created.to_dictionary()}")
        expect(created.card.card_number.endswith(args.pan[-4:]) and args.pan not in created.card.card_number,
               f"card {created.card.card_number!r} is not masked")
        again = merchant.tokens().create_token(request)
        expect(again.token == created.token and again.token_status == "UNCHANGED" and again.is_new_token is False,
               f"the same card again: {again.to_dictionary()}")
        read = merchant.tokens().get_token(created.token)
        expect(read.id == created.token and read.payment_product_id == product_id(args.pan), f"get_token {read.to_dictionary()}")
        expect(read.card.data.card_without_cvv.expiry_date == args.expiry, f"expiry {read.card.data.card_without_cvv.expiry_date}")
        state["token"] = created.token

    @check("token-first-cit-then-mit", "token")
    def _():
        first = payments.create_payment(token_payment(state["token"], AMOUNT, "cardholderInitiated", "first"))
        out = first.payment.payment_output.card_payment_method_specific_output
        expect(status_of(first.payment) == ("CAPTURED", 9) and out.token == state["token"], f"first {status_of(first.payment)} token {out.token}")
        expect(out.scheme_transaction_id, "no schemeTransactionId on the first payment")
        later = payments.create_payment(token_payment(state["token"], AMOUNT, "merchantInitiated", "subsequent"))
        later_out = later.payment.payment_output.card_payment_method_specific_output
        expect(status_of(later.payment) == ("CAPTURED", 9), f"subsequent {status_of(later.payment)}")
        expect(later_out.initial_scheme_transaction_id == out.scheme_transaction_id,
               f"initialSchemeTransactionId {later_out.initial_scheme_transaction_id}, want {out.scheme_transaction_id}")
        recurring = payments.create_payment(token_payment(state["token"], AMOUNT, recurring="recurring"))
        expect(status_of(recurring.payment) == ("CAPTURED", 9), f"recurring {status_of(recurring.payment)}")

    @check("tokenize-payment")
    def _():
        request = payment_request(args, AMOUNT, "FINAL_AUTHORIZATION")
        request.card_payment_method_specific_input.tokenize = True
        created = payments.create_payment(request)
        expect(created.creation_output.tokenization_succeeded is True and created.creation_output.token,
               f"creationOutput {created.creation_output.to_dictionary()}")
        expect(created.payment.payment_output.card_payment_method_specific_output.token == created.creation_output.token,
               "the payment's token is not creationOutput's")

    @check("session-accounts-on-file", "token")
    def _():
        request = SessionRequest()
        request.tokens = [state["token"], "unknown-token-3"]
        session = merchant.sessions().create_session(request)
        expect(session.invalid_tokens == ["unknown-token-3"], f"invalidTokens {session.invalid_tokens!r}")
        products = client_api_get(session, "products?countryCode=BE&currencyCode=EUR", args.timeout)
        accounts = [a for p in products.get("paymentProducts", []) for a in p.get("accountsOnFile", [])]
        expect([a.get("id") for a in accounts] == [state["token"]], f"accountsOnFile {accounts}")

    @check("token-delete", "token")
    def _():
        merchant.tokens().delete_token(state["token"])
        try:
            merchant.tokens().get_token(state["token"])
            raise Fail("a deleted token was read")
        except ApiException as e:
            expect(e.status_code == 404, f"HTTP {e.status_code}, want 404")
        try:
            payments.create_payment(token_payment(state["token"], AMOUNT))
            raise Fail("a deleted token paid")
        except ValidationException as e:
            expect(e.status_code == 400 and e.errors[0].property_name == "cardPaymentMethodSpecificInput.token",
                   f"HTTP {e.status_code} {[(x.id, x.property_name) for x in e.errors]}")

    # --- hosted checkout (docs/worldline.md, "Hosted Checkout"): the page posted as a browser would

    def post_form(url, fields):
        """A form POST that does not follow the redirect it gets: (status, Location, body)."""
        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *a, **k):
                return None
        opener = urllib.request.build_opener(NoRedirect)
        data = urllib.parse.urlencode(fields).encode()
        try:
            with opener.open(urllib.request.Request(url, data=data, method="POST"), timeout=args.timeout) as r:
                return r.status, r.headers.get("Location"), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Location"), e.read().decode()

    @check("hosted-checkout")
    def _():
        request, order, hosted = CreateHostedCheckoutRequest(), Order(), HostedCheckoutSpecificInput()
        order.amount_of_money = money(AMOUNT)
        order.references = OrderReferences()
        order.references.merchant_reference = "sdk-hosted-1"
        hosted.return_url, hosted.locale, hosted.show_result_page = "https://shop.example/back", "en_GB", False
        request.order, request.hosted_checkout_specific_input = order, hosted
        request.card_payment_method_specific_input = CardPaymentMethodSpecificInputBase()
        request.card_payment_method_specific_input.authorization_mode = "SALE"
        created = merchant.hosted_checkout().create_hosted_checkout(request)
        expect(created.hosted_checkout_id and created.returnmac and created.redirect_url and created.partial_redirect_url,
               f"created {created.to_dictionary()}")
        got = merchant.hosted_checkout().get_hosted_checkout(created.hosted_checkout_id)
        expect(got.status == "IN_PROGRESS", f"status {got.status} before the page")
        # The platform's frictionless test card: no challenge, straight back to returnUrl.
        status, location, _ = post_form(created.redirect_url, {"cardNumber": "4330264936344675", "expiryDate": "12/31", "cvv": "123"})
        expect(status == 303 and location and f"hostedCheckoutId={created.hosted_checkout_id}" in location
               and f"RETURNMAC={created.returnmac}" in location, f"the page answered {status} {location}")
        got = merchant.hosted_checkout().get_hosted_checkout(created.hosted_checkout_id)
        expect(got.status == "PAYMENT_CREATED" and got.created_payment_output.payment_status_category == "SUCCESSFUL"
               and status_of(got.created_payment_output.payment) == ("CAPTURED", 9),
               f"after the page: {got.to_dictionary()}")

    @check("hosted-tokenization")
    def _():
        request = CreateHostedTokenizationRequest()
        request.locale = "en_GB"
        created = merchant.hosted_tokenization().create_hosted_tokenization(request)
        expect(created.hosted_tokenization_id and created.hosted_tokenization_url, f"created {created.to_dictionary()}")
        status, _, body = post_form(created.hosted_tokenization_url,
                                    {"cardNumber": args.pan, "expiryDate": args.expiry[:2] + "/" + args.expiry[2:], "cvv": args.cvv})
        expect(status == 200 and "The card is saved" in body, f"the form answered {status}")
        got = merchant.hosted_tokenization().get_hosted_tokenization(created.hosted_tokenization_id)
        expect(got.token and got.token.id and got.token_status in ("CREATED", "UNCHANGED", "UPDATED"), f"get {got.to_dictionary()}")
        pay, order, card_input = CreatePaymentRequest(), Order(), CardPaymentMethodSpecificInput()
        order.amount_of_money = money(AMOUNT)
        card_input.authorization_mode = "SALE"
        pay.order, pay.card_payment_method_specific_input = order, card_input
        pay.hosted_tokenization_id = created.hosted_tokenization_id
        paid = payments.create_payment(pay)
        expect(status_of(paid.payment) == ("CAPTURED", 9)
               and paid.payment.payment_output.card_payment_method_specific_output.token == got.token.id,
               f"payment {status_of(paid.payment)}")

    @check("mobile-wallet")
    def _():
        expect(args.wallet_data, "no --wallet-data given")
        made = json.loads(args.wallet_data)
        for product, sealed in ((302, False), (320, True)):
            request, order, mobile = CreatePaymentRequest(), Order(), MobilePaymentMethodSpecificInput()
            order.amount_of_money = money(AMOUNT)
            mobile.payment_product_id, mobile.authorization_mode = product, "SALE"
            if sealed:
                mobile.encrypted_payment_data = made["encryptedPaymentData"]
            else:
                d, data = DecryptedPaymentData(), made["decryptedPaymentData"]
                d.dpan, d.expiry_date, d.cryptogram, d.eci = data["dpan"], data["expiryDate"], data["cryptogram"], data["eci"]
                mobile.decrypted_payment_data = d
            request.order, request.mobile_payment_method_specific_input = order, mobile
            paid = payments.create_payment(request)
            out = paid.payment.payment_output
            expect(status_of(paid.payment) == ("CAPTURED", 9) and out.payment_method == "mobile"
                   and out.mobile_payment_method_specific_output.payment_product_id == product,
                   f"{product}: {status_of(paid.payment)} {out.payment_method}")

    @check("redirect-paypal")
    def _():
        request, order, redirect = CreatePaymentRequest(), Order(), RedirectPaymentMethodSpecificInput()
        order.amount_of_money = money(AMOUNT)
        redirect.payment_product_id = 840
        redirect.redirection_data = RedirectionData()
        redirect.redirection_data.return_url = "https://shop.example/back"
        request.order, request.redirect_payment_method_specific_input = order, redirect
        created = payments.create_payment(request)
        action = created.merchant_action
        expect(action and action.action_type == "REDIRECT" and action.redirect_data.redirect_url and action.redirect_data.returnmac,
               f"merchantAction {action.to_dictionary() if action else None}")
        expect(status_of(created.payment) == ("REDIRECTED", 46), f"created {status_of(created.payment)}")
        status, location, _ = post_form(action.redirect_data.redirect_url, {"action": "approve"})
        expect(status == 303 and location and f"RETURNMAC={action.redirect_data.returnmac}" in location, f"the page answered {status} {location}")
        got = payments.get_payment(created.payment.id)
        expect(status_of(got) == ("CAPTURED", 9) and got.payment_output.payment_method == "redirect"
               and got.payment_output.redirect_payment_method_specific_output.payment_product_id == 840, f"after the page {status_of(got)}")

    client.close()
    server.shutdown()
    server.server_close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
