#!/usr/bin/env python3
"""Writes worldline-jwe-vector.json: an encryptedCustomerInput made by an independent JWE library (jwcrypto), for
cardbench's decryption of Worldline's client-side encryption to be tested against something it did not produce.

Worldline's client SDKs build a standard JWE (RFC 7516/7518): RSA-OAEP (SHA-1, MGF1-SHA1) and A256CBC-HS512, whose
64-byte key is the MAC key then the AES key, with the compact header {"alg","enc","kid"}. jwcrypto implements that
from the RFCs, so a decryptor that reads this vector reads the client SDKs' output too. Each run makes a new RSA
key, CEK and IV, so the vector changes; the script checks it before writing (jwcrypto decrypts it, and so does a
plain `cryptography` decryption that follows Worldline's layout).

    .venv/bin/python Tests/FrontsTests/Fixtures/make_worldline_jwe_vector.py   # needs jwcrypto==1.6.1
"""
import base64
import json
import pathlib
from importlib.metadata import version

from cryptography.hazmat.primitives import constant_time, hashes, hmac, padding, serialization
from cryptography.hazmat.primitives.asymmetric import padding as rsa_padding, rsa
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from jwcrypto import jwe, jwk

KEY_ID = "cardbench-vector-1"
OUTPUT = pathlib.Path(__file__).with_name("worldline-jwe-vector.json")
# What sdk-client-js (src/Encryptor.ts) encrypts, in its key order, with fixed values: JSON.stringify, no spaces.
PAYLOAD = {
    "clientSessionId": "vector-session",
    "nonce": "0123456789abcdef",
    "paymentProductId": 1,
    "tokenize": False,
    "collectedDeviceInformation": {
        "timezoneOffsetUtcMinutes": -60,
        "locale": "en-GB",
        "browserData": {"javaScriptEnabled": True, "colorDepth": 24, "screenHeight": 1080, "screenWidth": 1920,
                        "innerHeight": 947, "innerWidth": 1920}},
    "paymentValues": [{"key": "cardNumber", "value": "4111111111111111"}, {"key": "expiryDate", "value": "1230"},
                      {"key": "cvv", "value": "123"}, {"key": "cardholderName", "value": "Cardbench Vector"}],
}


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def decrypt_as_worldline(token, private_key):
    """Worldline's layout, written out with `cryptography` alone: the check that jwcrypto used the same one."""
    header, wrapped, iv, ciphertext, tag = token.split(".")
    cek = private_key.decrypt(unb64url(wrapped), rsa_padding.OAEP(rsa_padding.MGF1(hashes.SHA1()), hashes.SHA1(), None))
    mac_key, enc_key, aad = cek[:32], cek[32:], header.encode("ascii")
    mac = hmac.HMAC(mac_key, hashes.SHA512())
    mac.update(aad + unb64url(iv) + unb64url(ciphertext) + (len(aad) * 8).to_bytes(8, "big"))
    assert constant_time.bytes_eq(mac.finalize()[:32], unb64url(tag)), "authentication tag mismatch"
    decryptor = Cipher(algorithms.AES(enc_key), modes.CBC(unb64url(iv))).decryptor()
    unpadder = padding.PKCS7(128).unpadder()
    padded = decryptor.update(unb64url(ciphertext)) + decryptor.finalize()
    return json.loads(unpadder.update(padded) + unpadder.finalize()), json.loads(unb64url(header))


def main():
    private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_pem = private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption())
    public_der = private_key.public_key().public_bytes(serialization.Encoding.DER,
                                                       serialization.PublicFormat.SubjectPublicKeyInfo)
    plaintext = json.dumps(PAYLOAD, separators=(",", ":"))
    # The protected header exactly as the JS SDK serializes it; jwcrypto keeps these bytes (they are the AAD).
    header = json.dumps({"alg": "RSA-OAEP", "enc": "A256CBC-HS512", "kid": KEY_ID}, separators=(",", ":"))
    token = jwe.JWE(plaintext.encode(), protected=header)
    token.add_recipient(jwk.JWK.from_pem(serialization.load_der_public_key(public_der).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)))
    compact = token.serialize(compact=True)

    check = jwe.JWE()
    check.deserialize(compact, key=jwk.JWK.from_pem(private_pem))
    assert check.payload.decode() == plaintext
    assert unb64url(compact.split(".")[0]).decode() == header
    assert decrypt_as_worldline(compact, private_key) == (PAYLOAD, json.loads(header))

    vector = {
        "privateKeyPEM": private_pem.decode(),
        "publicKeyDER": base64.b64encode(public_der).decode(),  # what the Client API's crypto/publickey returns
        "keyId": KEY_ID,
        "jwe": compact,
        "plaintext": plaintext,
        "generator": f"Tests/FrontsTests/Fixtures/{pathlib.Path(__file__).name}: jwcrypto {version('jwcrypto')} "
                     f"(JWE RSA-OAEP + A256CBC-HS512), cryptography {version('cryptography')}",
    }
    OUTPUT.write_text(json.dumps(vector, indent=2) + "\n")
    print(f"wrote {OUTPUT}")


if __name__ == "__main__":
    main()
