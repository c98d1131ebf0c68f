#!/usr/bin/env python3
"""Every PayPal answer paysim gives, checked against PayPal's own OpenAPI 3.0 documents.

    scripts/lib/validate-paysim-paypal.py [--paysim .build/debug/paysim] [--specs DIR] [--verbose]

Starts the built paysim on a free port, seeds it through its admin API, takes an OAuth token and drives every PayPal
route and state paysim has (orders in each status and expired, authorizations, captures and refunds with their
actions and every error paysim can give, v1 sales and their refunds, disputes, chargebacks, a PENDING capture, the
401 of a bad token, injected 500 and 429 answers). For each answer it finds the operation by path and method in the
documents (Tests/Fixtures/paypal-openapi: Orders v2, Payments v2, Payments v1, Disputes v1), takes the response for
the status (else its `default`), resolves its $refs and validates the body with OpenAPI 3.0 semantics
(openapi-schema-validator's OAS30ReadValidator: a response may carry readOnly fields, never writeOnly ones), then
checks that it carries no property the documents do not define: every object schema is read as if it said
`additionalProperties: false`, unless it allows extras itself (`additionalProperties: true` or a schema). The
properties of an object are those of every schema that applies to it: its allOf members, and the anyOf/oneOf members
it matches, so a property defined by one member of a composition is known to the others.

A status whose response defines no body (Payments v2 lists 500 with a description only) is checked against the
document's `default` when paysim sends a body. What the documents do not describe is not counted: the OAuth token
endpoint (only named as the tokenUrl of the security scheme), the webhook certificate URL, dropped connections, and a
429 on the Orders and Payments v2 routes, which list no 429 and whose `default` is one of the errors 400, 401, 403,
404, 409, 415, 422, 500 and 503 (the line says "n/a"; on the v1 routes `default` is PayPal's general error, and the
429 is checked against it).

The seeds use ids of PayPal's shape (upper-case letters and digits; a merchant id of 13 characters of [2-9A-HJ-NP-Z]),
since the documents constrain them (`related_ids`, `account_id`); paysim's own ids and its default merchant id are
of that shape.

Prints one line per answer (ok/FAIL/n/a, method, route, status, what was asked, the errors), the answers by route,
and last "N PayPal answers validated, M failed"; exits 1 if any failed, 2 if it could not run.
"""
import argparse
import base64
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from datetime import datetime, timedelta, timezone

try:
    from openapi_schema_validator import OAS30ReadValidator, oas30_format_checker
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT4
except ImportError as error:  # scripts/test installs it; say how when run by hand
    print(f"validate-paysim-paypal: {error}; install it with `pip install openapi-schema-validator`", file=sys.stderr)
    sys.exit(2)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCUMENTS = ["checkout_orders_v2.json", "payments_payment_v2.json", "payments_payment_v1.json", "customer_disputes_v1.json",
             "reporting_transactions_v1.json", "notifications_webhooks_v1.json"]
CLIENT_ID, SECRET = "paysim-paypal-client", "paysim-paypal-secret"


# MARK: - The documents

def escape(key):
    return key.replace("~", "~0").replace("/", "~1")


class Document:
    """One OpenAPI document: its operations and JSON-pointer access to its schemas."""

    def __init__(self, path):
        self.name = os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            self.doc = json.load(f)
        self.uri = "urn:paypal-openapi:" + self.name
        self.operations = []  # (method, regex, template, pointer)
        for template, item in self.doc["paths"].items():
            pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
            for method, operation in item.items():
                if method in ("get", "post", "put", "patch", "delete") and "responses" in operation:
                    self.operations.append((method.upper(), re.compile(pattern), template,
                                            f"/paths/{escape(template)}/{method}"))

    def node(self, pointer):
        value = self.doc
        for part in pointer.split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            value = value[int(part)] if isinstance(value, list) else value[part]
        return value

    def resolve(self, pointer):
        """Follows $ref (siblings of a $ref are ignored, as OpenAPI 3.0 says); returns the final pointer."""
        seen = set()
        while isinstance(self.node(pointer), dict) and "$ref" in self.node(pointer):
            ref = self.node(pointer)["$ref"]
            if not ref.startswith("#/") or pointer in seen:
                raise ValueError(f"{self.name}: cannot follow $ref {ref} at {pointer}")
            seen.add(pointer)
            pointer = ref[1:]
        return pointer


class NoMatch(Exception):
    """No member of an anyOf/oneOf matches: the validation errors say why, and which properties apply is unknown."""


class NotDescribed(Exception):
    """An answer whose status the operation does not list and its `default` does not cover either."""


class Checker:
    def __init__(self, directory):
        self.documents = [Document(os.path.join(directory, name)) for name in DOCUMENTS]
        self.registry = Registry().with_resources(
            (d.uri, Resource.from_contents(d.doc, default_specification=DRAFT4)) for d in self.documents)
        self.validators = {}

    def operation(self, method, path):
        path = path.split("?", 1)[0]
        for d in self.documents:
            for m, regex, template, pointer in d.operations:
                if m == method and regex.match(path):
                    return d, template, pointer
        return None

    def validator(self, d, pointer):
        key = (d.name, pointer)
        if key not in self.validators:
            self.validators[key] = OAS30ReadValidator({"$ref": f"{d.uri}#{pointer}"}, registry=self.registry,
                                                      format_checker=oas30_format_checker)
        return self.validators[key]

    def valid(self, d, pointer, instance):
        return self.validator(d, pointer).is_valid(instance)

    def response_schema(self, d, operation, status, has_body):
        """The pointer of the JSON schema for `status` (or None when the response defines no body), and a note."""
        responses = d.node(operation + "/responses")
        note = None
        key = next((k for k in (str(status), f"{status // 100}XX") if k in responses), None)
        if key is None:
            if "default" not in responses:
                raise LookupError(f"{d.name} defines no response {status} and no default")
            key, note = "default", f"{status} is not listed; checked against default"
        pointer = d.resolve(f"{operation}/responses/{escape(key)}")
        response = d.node(pointer)
        if key == "default":
            self.default_covers(d, pointer, status)
        if "application/json" not in response.get("content", {}) and has_body and key != "default" \
                and "default" in responses:
            note = f"{status} defines no body; checked against default"
            pointer = d.resolve(f"{operation}/responses/default")
            response = d.node(pointer)
            self.default_covers(d, pointer, status)
        if "application/json" not in response.get("content", {}):
            return None, note
        return f"{pointer}/content/application~1json/schema", note

    def default_covers(self, d, pointer, status):
        """Orders v2 and Payments v2 spell out what `default` may be: one of error_400 … error_503. A status that is
        none of them (429) is an answer those documents do not describe at all."""
        schema = d.node(pointer).get("content", {}).get("application/json", {}).get("schema")
        if not schema:
            return
        members = d.node(d.resolve(f"{pointer}/content/application~1json/schema")).get("oneOf", [])
        statuses = set()
        for member in members:
            named = re.fullmatch(r"#/components/schemas/error_(\d{3})", member.get("$ref", ""))
            if named:
                statuses.add(int(named.group(1)))
        if statuses and status not in statuses:
            raise NotDescribed(f"{d.name} lists no {status} here and its default is one of the errors "
                               f"{', '.join(map(str, sorted(statuses)))}")

    # The strict half: no property the documents do not define.

    def applicable(self, d, pointer, instance):
        """The schemas that apply to `instance` at `pointer`: itself, its allOf members, the anyOf/oneOf members it
        matches (recursively, $refs followed)."""
        pointer = d.resolve(pointer)
        schema = d.node(pointer)
        out = [pointer]
        if not isinstance(schema, dict):
            return out
        for i, _ in enumerate(schema.get("allOf", [])):
            out += self.applicable(d, f"{pointer}/allOf/{i}", instance)
        for keyword in ("anyOf", "oneOf"):
            matched = [f"{pointer}/{keyword}/{i}" for i, _ in enumerate(schema.get(keyword, []))
                       if self.valid(d, f"{pointer}/{keyword}/{i}", instance)]
            if schema.get(keyword) and not matched:
                raise NoMatch()
            for member in matched:
                out += self.applicable(d, member, instance)
        return out

    def unknown_properties(self, d, pointers, instance, path="", errors=None):
        errors = [] if errors is None else errors
        leaves = []
        for p in pointers:
            try:
                found = self.applicable(d, p, instance)
            except NoMatch:
                return errors
            for leaf in found:
                if leaf not in leaves:
                    leaves.append(leaf)
        schemas = [(leaf, d.node(leaf)) for leaf in leaves if isinstance(d.node(leaf), dict)]
        if isinstance(instance, dict):
            for key, value in instance.items():
                children, allowed = [], False
                for leaf, schema in schemas:
                    extra = schema.get("additionalProperties")
                    if key in schema.get("properties", {}):
                        children.append(f"{leaf}/properties/{escape(key)}")
                        allowed = True
                    elif extra is True or isinstance(extra, dict):
                        allowed = True
                        if isinstance(extra, dict):
                            children.append(f"{leaf}/additionalProperties")
                if not allowed:
                    errors.append(f"{path or '/'}: property '{key}' is not defined by the documents")
                elif children:
                    self.unknown_properties(d, children, value, f"{path}/{key}", errors)
        elif isinstance(instance, list):
            children = [f"{leaf}/items" for leaf, schema in schemas if isinstance(schema.get("items"), dict)]
            if children:
                for i, item in enumerate(instance):
                    self.unknown_properties(d, children, item, f"{path}/{i}", errors)
        return errors

    def check(self, method, path, status, body):
        """(route, errors, note) for one answer."""
        found = self.operation(method, path)
        if found is None:
            return f"{method} {path}", ["no operation in the documents for this path and method"], None
        d, template, operation = found
        route = f"{method} {template}"
        try:
            schema, note = self.response_schema(d, operation, status, bool(body))
        except LookupError as error:
            return route, [str(error)], None
        if schema is None:
            return route, ([] if not body else [f"the documents define no body for {status}, paysim sent one"]), note
        if not body:
            return route, [f"the documents define a body for {status}, paysim sent none"], note
        try:
            instance = json.loads(body)
        except ValueError as error:
            return route, [f"the body is not JSON: {error}"], note
        errors = []
        for e in sorted(self.validator(d, schema).iter_errors(instance), key=lambda e: list(e.absolute_path)):
            where = "/" + "/".join(str(p) for p in e.absolute_path)
            # For a failed anyOf/oneOf, the member errors say why each did not match.
            reasons = sorted({f"{'/'.join(str(p) for p in c.absolute_path)}: {c.message}" for c in (e.context or [])})
            errors.append(f"{where}: {e.message[:300]}" + (f" [{'; '.join(reasons)[:600]}]" if reasons else ""))
        errors += self.unknown_properties(d, [schema], instance)
        return route, errors, note


# MARK: - paysim

class Paysim:
    def __init__(self, binary):
        self.binary = binary
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
        self.process = None

    def __enter__(self):
        self.dir = tempfile.TemporaryDirectory(prefix="paysim-openapi-")
        port_file = os.path.join(self.dir.name, "port")
        self.log = open(os.path.join(self.dir.name, "stderr"), "w+")
        self.process = subprocess.Popen([self.binary, "--listen", "127.0.0.1:0", "--port-file", port_file,
                                         "--threads", "2"], stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.time() + 30
        while time.time() < deadline and self.process.poll() is None:
            try:
                with open(port_file) as f:
                    self.base = f"http://127.0.0.1:{int(f.read().strip())}"
                return self
            except (OSError, ValueError):
                time.sleep(0.05)
        self.log.seek(0)
        raise RuntimeError(f"paysim did not write its port within 30 s: {self.log.read()[-2000:]}")

    def __exit__(self, *_):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        self.dir.cleanup()

    def request(self, method, path, body=None, headers=None):
        data = body if isinstance(body, bytes) or body is None else (
            body.encode() if isinstance(body, str) else json.dumps(body).encode())
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=dict(headers or {}))
        if data is not None and "Content-Type" not in request.headers:
            request.add_header("Content-Type", "application/json")
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def admin(self, path, body):
        status, answer = self.request("POST", path, body)
        if status not in (200, 201):
            raise RuntimeError(f"POST {path} {json.dumps(body)} → {status} {answer[:500]!r}")
        return json.loads(answer) if answer else None

    def token(self):
        basic = base64.b64encode(f"{CLIENT_ID}:{SECRET}".encode()).decode()
        status, answer = self.request("POST", "/v1/oauth2/token", b"grant_type=client_credentials",
                                      {"Authorization": f"Basic {basic}",
                                       "Content-Type": "application/x-www-form-urlencoded"})
        if status != 200:
            raise RuntimeError(f"POST /v1/oauth2/token → {status} {answer[:300]!r}")
        return json.loads(answer)["access_token"]


# MARK: - What is asked

class Run:
    def __init__(self, paysim, checker, verbose):
        self.paysim, self.checker, self.verbose = paysim, checker, verbose
        self.token = None
        self.results = []  # (route, status, ok)
        self.undescribed = []
        self.request_ids = 0

    def ask(self, what, method, path, body=None, expect=None, token=None, request_id=None, raw=None, observed=None):
        """`observed`: (fields, source) for an answer PayPal's production gives that its documents do not describe:
        checked against what was seen there (those fields, those values), not against the documents."""
        headers = {"Authorization": f"Bearer {token or self.token}"} if token != "" else {}
        if method == "POST":
            self.request_ids += 1
            headers["PayPal-Request-Id"] = request_id or f"openapi-check-{self.request_ids}"
        status, answer = self.paysim.request(method, path, raw if raw is not None else body, headers)
        if observed is not None:
            fields, source = observed
            route = f"{method} {self.checker.operation(method, path)[1]} (as observed: {source})"
            try:
                instance = json.loads(answer)
            except ValueError:
                instance = None
            errors = [] if status == expect else [f"expected HTTP {expect}, got {status}"]
            if not isinstance(instance, dict):
                errors.append(f"not a JSON object: {answer[:200]!r}")
            else:
                errors += [f"{k}: {instance.get(k)!r}, observed {v!r}" for k, v in fields.items() if instance.get(k) != v]
            self.results.append((route, status, not errors))
            label = f"{'ok  ' if not errors else 'FAIL'} {route} {status}  {what}"
            print(label if not errors else label + "\n" + "\n".join(f"       - {e}" for e in errors), flush=True)
            return instance
        try:
            route, errors, note = self.checker.check(method, path, status, answer)
        except NotDescribed as why:
            route = f"{method} {self.checker.operation(method, path)[1]}"
            self.undescribed.append(route)
            print(f"n/a  {route} {status}  {what}: {why}; not counted", flush=True)
            return None
        if expect is not None and status != expect:
            errors = [f"expected HTTP {expect} (the case this line drives), got {status}: {answer[:300]!r}"] + errors
        ok = not errors
        self.results.append((route, status, ok))
        label = f"{'ok  ' if ok else 'FAIL'} {route} {status}  {what}" + (f"  ({note})" if note else "")
        print(label if ok else label + "\n" + "\n".join(f"       - {e}" for e in errors), flush=True)
        if self.verbose:
            print("       " + answer.decode(errors="replace")[:2000], flush=True)
        try:
            return json.loads(answer) if answer else None
        except ValueError:
            return None


def drive(run):
    p = run.paysim
    ask = run.ask
    now = datetime.now(timezone.utc)
    stamp = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")
    old = stamp(now - timedelta(hours=4))

    run.token = p.token()

    # Orders in every status, with payments in every status.
    p.admin("/admin/paypal/orders", [
        {"id": "OCREATED", "intent": "CAPTURE", "status": "CREATED", "currency": "USD", "amount": "10.00"},
        {"id": "OSAVED", "intent": "CAPTURE", "status": "SAVED", "currency": "USD", "amount": "10.00"},
        {"id": "OAPPROVED", "intent": "AUTHORIZE", "status": "APPROVED", "currency": "EUR", "amount": "20.00",
         "reference_id": "cart-7", "merchant_id": "MERCHANT23456"},
        {"id": "OACTION", "intent": "CAPTURE", "status": "PAYER_ACTION_REQUIRED", "currency": "GBP", "amount": "5.00"},
        {"id": "OEXPIRED", "intent": "CAPTURE", "status": "CREATED", "currency": "USD", "amount": "5.00", "create_time": old},
        {"id": "OVOIDED", "intent": "AUTHORIZE", "status": "VOIDED", "currency": "USD", "amount": "30.00",
         "authorizations": [{"id": "AVOIDED", "status": "VOIDED"}]},
        {"id": "OCAPTURED", "intent": "CAPTURE", "status": "COMPLETED", "currency": "USD", "amount": "100.00",
         "captures": [{"id": "C1"}], "refunds": [{"id": "R1", "capture_id": "C1", "amount": "10.00"}]},
        {"id": "OAUTH", "intent": "AUTHORIZE", "status": "COMPLETED", "currency": "USD", "amount": "100.00",
         "authorizations": [{"id": "AOPEN"}]},
        {"id": "OAUTHVOID", "intent": "AUTHORIZE", "status": "COMPLETED", "currency": "EUR", "amount": "40.00",
         "authorizations": [{"id": "ATOVOID"}]},
        {"id": "OAUTHMIXED", "intent": "AUTHORIZE", "status": "COMPLETED", "currency": "USD", "amount": "100.00",
         "authorizations": [{"id": "APARTIAL", "status": "PARTIALLY_CAPTURED"}, {"id": "ARE", "reauthorizes": "APARTIAL"}],
         "captures": [{"id": "CPART", "authorization_id": "APARTIAL", "amount": "40.00"}],
         "refunds": [{"id": "RPART", "capture_id": "CPART", "amount": "15.00"}]},
        {"id": "OAUTHDONE", "intent": "AUTHORIZE", "status": "COMPLETED", "currency": "USD", "amount": "50.00",
         "authorizations": [{"id": "ACAPTURED", "status": "CAPTURED"}],
         "captures": [{"id": "CFINAL", "authorization_id": "ACAPTURED", "final_capture": True, "status": "REFUNDED"}],
         "refunds": [{"id": "RFULL", "capture_id": "CFINAL"}]},
        {"id": "OAUTHCREATEDCAPTURED", "intent": "AUTHORIZE", "status": "COMPLETED", "currency": "USD", "amount": "50.00",
         "authorizations": [{"id": "ACREATEDWITHCAPTURE"}],
         "captures": [{"id": "COFCREATED", "authorization_id": "ACREATEDWITHCAPTURE", "amount": "10.00"}]},
        {"id": "OAUTHNOTHINGLEFT", "intent": "AUTHORIZE", "status": "COMPLETED", "currency": "USD", "amount": "20.00",
         "authorizations": [{"id": "ANOTHINGLEFT", "status": "PARTIALLY_CAPTURED"}],
         "captures": [{"id": "CALL", "authorization_id": "ANOTHINGLEFT"}]},
        {"id": "ODENIED", "intent": "AUTHORIZE", "status": "COMPLETED", "currency": "USD", "amount": "20.00",
         "authorizations": [{"id": "ADENIED", "status": "DENIED"}]},
        {"id": "OAUTHPENDING", "intent": "AUTHORIZE", "status": "COMPLETED", "currency": "USD", "amount": "20.00",
         "authorizations": [{"id": "APENDING", "status": "PENDING"}]},
        {"id": "OPENDING", "intent": "CAPTURE", "status": "COMPLETED", "currency": "USD", "amount": "60.00",
         "captures": [{"id": "CECHECK", "status": "PENDING", "status_details_reason": "ECHECK"}]},
        {"id": "OREVIEW", "intent": "CAPTURE", "status": "COMPLETED", "currency": "USD", "amount": "60.00",
         "captures": [{"id": "CREVIEW", "status": "PENDING", "status_details_reason": "PENDING_REVIEW"}]},
        {"id": "OFAILED", "intent": "CAPTURE", "status": "COMPLETED", "currency": "USD", "amount": "60.00",
         "captures": [{"id": "CDECLINED", "status": "DECLINED"}, {"id": "CFAILED", "status": "FAILED"}]},
        {"id": "OREFUNDS", "intent": "CAPTURE", "status": "COMPLETED", "currency": "USD", "amount": "90.00",
         "captures": [{"id": "CREFUNDS", "status": "PARTIALLY_REFUNDED"}],
         "refunds": [{"id": "RPENDING", "capture_id": "CREFUNDS", "status": "PENDING", "amount": "10.00"},
                     {"id": "RFAILED", "capture_id": "CREFUNDS", "status": "FAILED", "amount": "10.00"},
                     {"id": "RCANCELLED", "capture_id": "CREFUNDS", "status": "CANCELLED", "amount": "10.00"}]},
        {"id": "OOVER", "intent": "CAPTURE", "status": "COMPLETED", "currency": "USD", "amount": "30.00",
         "captures": [{"id": "COVER"}], "refunds": [{"id": "ROVER", "capture_id": "COVER"}]},
        {"id": "OJPY", "intent": "AUTHORIZE", "status": "COMPLETED", "currency": "JPY", "amount": "1000",
         "authorizations": [{"id": "AJPY"}]},
        {"id": "OHUF", "intent": "CAPTURE", "status": "COMPLETED", "currency": "HUF", "amount": "1500.00",
         "captures": [{"id": "CHUF"}]},
        {"id": "ODISPUTED", "intent": "CAPTURE", "status": "COMPLETED", "currency": "USD", "amount": "100.00",
         "captures": [{"id": "CDISPUTED"}, {"id": "CCHARGEBACK"}, {"id": "CREVERSED"}]},
    ])

    for order in ["OCREATED", "OSAVED", "OAPPROVED", "OACTION", "OVOIDED", "OCAPTURED", "OAUTH", "OAUTHMIXED",
                  "OAUTHDONE", "ODENIED", "OAUTHPENDING", "OPENDING", "OFAILED", "OREFUNDS", "OJPY", "OHUF"]:
        ask(f"order {order}", "GET", f"/v2/checkout/orders/{order}", expect=200)
    ask("an unapproved order older than 3 hours has expired", "GET", "/v2/checkout/orders/OEXPIRED", expect=404)
    ask("an order PayPal does not know", "GET", "/v2/checkout/orders/ONONE", expect=404)

    for a in ["AOPEN", "AVOIDED", "APARTIAL", "ARE", "ACAPTURED", "ADENIED", "APENDING", "AJPY"]:
        ask(f"authorization {a}", "GET", f"/v2/payments/authorizations/{a}", expect=200)
    ask("an unknown authorization", "GET", "/v2/payments/authorizations/ANONE", expect=404)
    for c in ["C1", "CPART", "CFINAL", "CECHECK", "CREVIEW", "CDECLINED", "CFAILED", "CREFUNDS", "CHUF"]:
        ask(f"capture {c}", "GET", f"/v2/payments/captures/{c}", expect=200)
    ask("an unknown capture", "GET", "/v2/payments/captures/CNONE", expect=404)
    for r in ["R1", "RPART", "RFULL", "RPENDING", "RFAILED", "RCANCELLED"]:
        ask(f"refund {r}", "GET", f"/v2/payments/refunds/{r}", expect=200)
    ask("an unknown refund", "GET", "/v2/payments/refunds/RNONE", expect=404)

    # Captures: partial, replayed, final; then every refusal.
    cap = "/v2/payments/authorizations/{}/capture"
    usd = lambda v: {"amount": {"currency_code": "USD", "value": v}}
    ask("a partial capture", "POST", cap.format("AOPEN"), dict(usd("30.00"), final_capture=False), 201, request_id="cap-1")
    ask("the same PayPal-Request-Id again (the first answer)", "POST", cap.format("AOPEN"),
        dict(usd("30.00"), final_capture=False), 201, request_id="cap-1")
    ask("more than is left", "POST", cap.format("AOPEN"), usd("80.00"), 422)
    ask("another currency", "POST", cap.format("AOPEN"), {"amount": {"currency_code": "EUR", "value": "5.00"}}, 422)
    ask("amount without currency_code", "POST", cap.format("AOPEN"), {"amount": {"value": "5.00"}}, 400)
    ask("amount without value", "POST", cap.format("AOPEN"), {"amount": {"currency_code": "USD"}}, 400)
    ask("three decimals", "POST", cap.format("AOPEN"), usd("5.001"), 422)
    ask("a zero amount", "POST", cap.format("AOPEN"), usd("0.00"), 422)
    ask("a negative amount", "POST", cap.format("AOPEN"), usd("-5.00"), 422)
    ask("final_capture not a boolean", "POST", cap.format("AOPEN"), dict(usd("5.00"), final_capture="yes"), 400)
    ask("a body that is not JSON", "POST", cap.format("AOPEN"), raw=b"{not json", expect=400)
    ask("a body that is not an object", "POST", cap.format("AOPEN"), raw=b"[1]", expect=400)
    ask("a PayPal-Request-Id longer than 108 characters", "POST", cap.format("AOPEN"), usd("5.00"), 400,
        request_id="k" * 109)
    ask("decimals in JPY", "POST", cap.format("AJPY"), {"amount": {"currency_code": "JPY", "value": "10.5"}}, 422)
    ask("a JPY capture", "POST", cap.format("AJPY"), {"amount": {"currency_code": "JPY", "value": "100"}}, 201)
    ask("the final capture of what is left", "POST", cap.format("AOPEN"), {"final_capture": True}, 201)
    ask("an authorization already captured", "POST", cap.format("AOPEN"), usd("1.00"), 422)
    ask("a voided authorization", "POST", cap.format("AVOIDED"), usd("1.00"), 422)
    ask("a denied authorization", "POST", cap.format("ADENIED"), usd("1.00"), 422)
    ask("a pending authorization", "POST", cap.format("APENDING"), usd("1.00"), 422)
    ask("nothing left to capture", "POST", cap.format("ANOTHINGLEFT"), {}, 422)
    ask("a partially captured authorization", "POST", cap.format("APARTIAL"), usd("10.00"), 201)
    ask("an unknown authorization", "POST", cap.format("ANONE"), usd("1.00"), 404)

    # Voids.
    void = "/v2/payments/authorizations/{}/void"
    ask("a body that is not JSON", "POST", void.format("ATOVOID"), raw=b"nope", expect=400)
    ask("a void", "POST", void.format("ATOVOID"), None, 200, request_id="void-1")
    ask("the same PayPal-Request-Id again (the first answer)", "POST", void.format("ATOVOID"), None, 200,
        request_id="void-1")
    ask("voided again", "POST", void.format("ATOVOID"), None, 422)
    ask("a captured authorization", "POST", void.format("ACAPTURED"), None, 422)
    ask("a partially captured authorization", "POST", void.format("APARTIAL"), None, 422)
    ask("a CREATED authorization with a capture", "POST", void.format("ACREATEDWITHCAPTURE"), None, 422)
    ask("a denied authorization", "POST", void.format("ADENIED"), None, 422)
    ask("an unknown authorization", "POST", void.format("ANONE"), None, 404)

    # Refunds.
    refund = "/v2/payments/captures/{}/refund"
    ask("a partial refund", "POST", refund.format("C1"), usd("20.00"), 201)
    ask("more than is left", "POST", refund.format("C1"), usd("500.00"), 422)
    ask("another currency", "POST", refund.format("C1"), {"amount": {"currency_code": "GBP", "value": "1.00"}}, 422)
    ask("amount without currency_code", "POST", refund.format("C1"), {"amount": {"value": "1.00"}}, 400)
    ask("amount without value", "POST", refund.format("C1"), {"amount": {"currency_code": "USD"}}, 400)
    ask("three decimals", "POST", refund.format("C1"), usd("1.001"), 422)
    ask("a zero amount", "POST", refund.format("C1"), usd("0.00"), 422)
    ask("a negative amount", "POST", refund.format("C1"), usd("-1.00"), 422)
    ask("decimals in HUF", "POST", refund.format("CHUF"), {"amount": {"currency_code": "HUF", "value": "10.50"}}, 422)
    ask("a body that is not JSON", "POST", refund.format("C1"), raw=b"{\"amount\":", expect=400)
    ask("a PayPal-Request-Id longer than 108 characters", "POST", refund.format("C1"), usd("1.00"), 400,
        request_id="k" * 109)
    ask("a refund", "POST", refund.format("C1"), usd("2.00"), 201, request_id="refund-1")
    ask("the same PayPal-Request-Id again (the first answer)", "POST", refund.format("C1"), usd("2.00"), 201,
        request_id="refund-1")
    ask("the rest", "POST", refund.format("C1"), None, 201)
    ask("a capture fully refunded", "POST", refund.format("C1"), usd("1.00"), 422)
    ask("a pending capture", "POST", refund.format("CECHECK"), usd("1.00"), 422)
    ask("a declined capture", "POST", refund.format("CDECLINED"), usd("1.00"), 422)
    ask("nothing left to refund", "POST", refund.format("COVER"), {}, 422)
    ask("an unknown capture", "POST", refund.format("CNONE"), usd("1.00"), 404)
    ask("after the actions", "GET", "/v2/checkout/orders/OAUTH", expect=200)
    ask("after the actions", "GET", "/v2/checkout/orders/OCAPTURED", expect=200)
    ask("after the void", "GET", "/v2/payments/authorizations/ATOVOID", expect=200)

    # Disputes and chargebacks.
    p.admin("/admin/paypal/disputes", {"id": "PP-D-OPEN", "transaction_id": "CDISPUTED", "amount": "40.00"})
    ask("a capture under an open dispute (PARTIALLY_REFUNDED, no record)", "GET", "/v2/payments/captures/CDISPUTED",
        expect=200)
    for n, status in enumerate(["WAITING_FOR_SELLER_RESPONSE", "WAITING_FOR_BUYER_RESPONSE", "UNDER_REVIEW", "OTHER"]):
        p.admin("/admin/paypal/disputes", {"id": f"PP-D-{status.replace('_', '-')}", "transaction_id": "CDISPUTED", "status": status})
        ask(f"a dispute {status}", "GET", f"/v1/customer/disputes/PP-D-{status.replace('_', '-')}", expect=200)
    ask("an open dispute", "GET", "/v1/customer/disputes/PP-D-OPEN", expect=200)
    p.admin("/admin/paypal/disputes", {"resolve": "PP-D-OPEN", "outcome": "seller"})
    ask("a dispute the seller won", "GET", "/v1/customer/disputes/PP-D-OPEN", expect=200)
    ask("its capture, COMPLETED again", "GET", "/v2/payments/captures/CDISPUTED", expect=200)
    p.admin("/admin/paypal/disputes", {"id": "PP-D-LOST", "transaction_id": "CCHARGEBACK"})
    resolved = p.admin("/admin/paypal/disputes", {"resolve": "PP-D-LOST", "outcome": "buyer"})
    ask("a dispute the buyer won", "GET", "/v1/customer/disputes/PP-D-LOST", expect=200)
    ask("its capture, REFUNDED", "GET", "/v2/payments/captures/CCHARGEBACK", expect=200)
    ask("the reversal record", "GET", f"/v2/payments/refunds/{resolved['reversal']['id']}", expect=200)
    reversal = p.admin("/admin/paypal/reversals", {"capture_id": "CREVERSED"})
    ask("a reversed capture, REFUNDED", "GET", "/v2/payments/captures/CREVERSED", expect=200)
    ask("PayPal's reversal record", "GET", f"/v2/payments/refunds/{reversal['id']}", expect=200)
    ask("an order with reversal records among its refunds", "GET", "/v2/checkout/orders/ODISPUTED", expect=200)
    ask("refunding a reversed capture", "POST", refund.format("CREVERSED"), usd("1.00"), 422)
    ask("an unknown dispute", "GET", "/v1/customer/disputes/PP-D-NONE", expect=404)
    p.admin("/admin/paypal/permissions", {"disputes": False})
    ask("an app without the disputes scope", "GET", "/v1/customer/disputes/PP-D-OPEN", expect=403)
    p.admin("/admin/paypal/permissions", {"disputes": True})

    # v1 sales and their refunds.
    p.admin("/admin/paypal/sales", [
        {"id": "SDONE", "currency": "USD", "amount": "25.00", "parent_payment": "PAYID-SALE1"},
        {"id": "SSUB", "currency": "EUR", "amount": "9.99", "billing_agreement_id": "I-SUBSCRIPTION1"},
        {"id": "SPENDING", "currency": "USD", "amount": "25.00", "state": "pending", "reason_code": "ECHECK"},
        {"id": "SDENIED", "currency": "USD", "amount": "25.00", "state": "denied"},
        {"id": "SREFUNDED", "currency": "USD", "amount": "25.00", "state": "refunded"},
        {"id": "SJPY", "currency": "JPY", "amount": "500"},
        {"id": "SDISPUTED", "currency": "USD", "amount": "25.00"},
    ])
    for s in ["SDONE", "SSUB", "SPENDING", "SDENIED", "SREFUNDED", "SJPY"]:
        ask(f"sale {s}", "GET", f"/v1/payments/sale/{s}", expect=200)
    ask("an unknown sale", "GET", "/v1/payments/sale/SNONE", expect=404)
    sale_refund = "/v1/payments/sale/{}/refund"
    usd1 = lambda v: {"amount": {"total": v, "currency": "USD"}}
    ask("a partial sale refund", "POST", sale_refund.format("SDONE"), usd1("5.00"), 201, request_id="sale-refund-1")
    ask("the same PayPal-Request-Id again (the first answer)", "POST", sale_refund.format("SDONE"), usd1("5.00"), 201,
        request_id="sale-refund-1")
    ask("the partially refunded sale", "GET", "/v1/payments/sale/SDONE", expect=200)
    ask("more than is left", "POST", sale_refund.format("SDONE"), usd1("50.00"), 422)
    ask("another currency", "POST", sale_refund.format("SDONE"), {"amount": {"total": "1.00", "currency": "EUR"}}, 422)
    ask("three decimals", "POST", sale_refund.format("SDONE"), usd1("1.001"), 400)
    ask("a zero amount", "POST", sale_refund.format("SDONE"), usd1("0.00"), 400)
    ask("a total without currency", "POST", sale_refund.format("SDONE"), {"amount": {"total": "1.00"}}, 422)
    ask("a body that is not JSON", "POST", sale_refund.format("SDONE"), raw=b"[]", expect=400)
    ask("decimals in JPY", "POST", sale_refund.format("SJPY"), {"amount": {"total": "1.5", "currency": "JPY"}}, 400)
    ask("a PayPal-Request-Id longer than 78 characters", "POST", sale_refund.format("SDONE"), usd1("1.00"), 400,
        request_id="k" * 79)
    ask("the rest of the sale", "POST", sale_refund.format("SDONE"), {}, 201)
    ask("the refunded sale", "GET", "/v1/payments/sale/SDONE", expect=200)
    ask("a refunded sale", "POST", sale_refund.format("SDONE"), usd1("1.00"), 422)
    ask("a subscription sale refund", "POST", sale_refund.format("SSUB"),
        {"amount": {"total": "9.99", "currency": "EUR"}}, 201)
    ask("an unknown sale", "POST", sale_refund.format("SNONE"), usd1("1.00"), 404)
    p.admin("/admin/paypal/disputes", {"id": "PP-D-SALE", "transaction_id": "SDISPUTED"})
    ask("a dispute on a sale", "GET", "/v1/customer/disputes/PP-D-SALE", expect=200)
    p.admin("/admin/paypal/disputes", {"resolve": "PP-D-SALE", "outcome": "buyer"})
    ask("a sale dispute the buyer won", "GET", "/v1/customer/disputes/PP-D-SALE", expect=200)
    ask("the sale taken back by the chargeback", "GET", "/v1/payments/sale/SDISPUTED", expect=200)

    # Transaction Search (reporting_transactions_v1.json): its windows, pages, limits and permission.
    day = lambda d: (now - timedelta(days=d)).strftime("%Y-%m-%d")
    p.admin("/admin/paypal/orders", [
        {"id": "OSEARCH", "intent": "CAPTURE", "status": "COMPLETED", "currency": "USD", "amount": "40.00",
         "captures": [{"id": "CSEARCH", "status": "PARTIALLY_REFUNDED", "create_time": f"{day(2)}T10:00:00Z"}],
         "refunds": [{"id": "RSEARCH", "capture_id": "CSEARCH", "amount": "5.00", "create_time": f"{day(2)}T11:00:00Z"}]}])
    search = f"/v1/reporting/transactions?start_date={day(3)}T00:00:00Z&end_date={day(1)}T00:00:00Z"
    ask("transactions of two days", "GET", search + "&fields=transaction_info&page_size=500&page=1", expect=200)
    ask("one a page, the second page", "GET", search + "&page_size=1&page=2", expect=200)
    ask("a page past the last", "GET", search + "&page_size=500&page=9", expect=200)
    ask("with the non-balance rows", "GET", search + "&balance_affecting_records_only=N", expect=200)
    ask("more than 31 days", "GET", f"/v1/reporting/transactions?start_date={day(40)}T00:00:00Z&end_date={day(1)}T00:00:00Z",
        expect=400)
    ask("a start later than the data reaches", "GET",
        f"/v1/reporting/transactions?start_date={stamp(now - timedelta(hours=1))}&end_date={stamp(now)}", expect=400,
        observed=({"name": "INVALID_REQUEST", "message": "Data for the given start date is not available.", "details": []},
                  "PayPal-node-SDK#452"))
    ask("no start_date", "GET", f"/v1/reporting/transactions?end_date={day(1)}T00:00:00Z", expect=400)
    ask("a page_size above 500", "GET", search + "&page_size=501", expect=400)
    p.admin("/admin/paypal/permissions", {"search_max_items": 1})
    ask("more than the result set may hold", "GET", search, expect=400,
        observed=({"name": "RESULTSET_TOO_LARGE",
                   "message": "Result set size is greater than the maximum limit. Change the filter criteria and try again."},
                  "airbytehq/airbyte#4404"))
    p.admin("/admin/paypal/permissions", {"search_max_items": 10000, "transaction_search": False})
    ask("an app without the Transaction Search permission", "GET", search, expect=403)
    p.admin("/admin/paypal/permissions", {"transaction_search": True})

    # The webhook events list (notifications_webhooks_v1.json): events made, delivered or lost, and its next links.
    p.admin("/admin/webhooks/send", {"provider": "paypal", "event_type": "PAYMENT.CAPTURE.COMPLETED", "resource_id": "CSEARCH",
                                     "lost": True, "count": 3, "create_time": f"{day(2)}T10:00:01Z"})
    events = f"/v1/notifications/webhooks-events?start_time={day(3)}T00:00:00Z&end_time={day(1)}T00:00:00Z"
    first = ask("two events a page", "GET", events + "&page_size=2", expect=200) or {}
    following = [link["href"] for link in first.get("links", []) if link.get("rel") == "next"]
    if not following:
        run.results.append(("GET /v1/notifications/webhooks-events", 200, False))
        print("FAIL GET /v1/notifications/webhooks-events  three events two a page gave no next link", flush=True)
    else:
        ask("the next page, by its link", "GET", following[0][following[0].index("/v1/"):], expect=200)
    ask("by transaction id", "GET", "/v1/notifications/webhooks-events?transaction_id=CSEARCH", expect=200)
    ask("by event type, none", "GET", events + "&event_type=PAYMENT.CAPTURE.DENIED", expect=200)
    ask("a start older than PayPal keeps events", "GET",
        f"/v1/notifications/webhooks-events?start_time={day(60)}T00:00:00Z", expect=400)
    ask("a start that is no time", "GET", "/v1/notifications/webhooks-events?start_time=yesterday", expect=400)

    # A bad token, on every route.
    for method, path in [("GET", "/v2/checkout/orders/OCAPTURED"), ("GET", "/v2/payments/authorizations/AOPEN"),
                         ("GET", "/v2/payments/captures/C1"), ("GET", "/v2/payments/refunds/R1"),
                         ("POST", cap.format("APARTIAL")), ("POST", void.format("APARTIAL")),
                         ("POST", refund.format("CPART")), ("GET", "/v1/payments/sale/SSUB"),
                         ("POST", sale_refund.format("SSUB")), ("GET", "/v1/customer/disputes/PP-D-OPEN"),
                         ("GET", search), ("GET", "/v1/notifications/webhooks-events")]:
        ask("a bad token", method, path, {} if method == "POST" else None, 401, token="A21AA-not-a-token")
    ask("no Authorization header", "GET", "/v2/checkout/orders/OCAPTURED", expect=401, token="")

    # Injected faults: 500 and 429 as PayPal gives them.
    p.admin("/admin/faults", {"error_rate": 1})
    for method, path in [("GET", "/v2/checkout/orders/OCAPTURED"), ("GET", "/v2/payments/captures/C1"),
                         ("POST", refund.format("CPART")), ("GET", "/v1/payments/sale/SSUB"),
                         ("GET", "/v1/customer/disputes/PP-D-OPEN")]:
        ask("an injected server error", method, path, usd("1.00") if method == "POST" else None, 500)
    p.admin("/admin/faults", {"error_rate": 0, "rate_429": 1, "retry_after": 1})
    for method, path in [("GET", "/v2/checkout/orders/OCAPTURED"), ("GET", "/v2/payments/authorizations/AOPEN"),
                         ("POST", cap.format("APARTIAL")), ("GET", "/v1/payments/sale/SSUB"),
                         ("GET", "/v1/customer/disputes/PP-D-OPEN")]:
        ask("an injected rate limit", method, path, usd("1.00") if method == "POST" else None, 429)
    p.admin("/admin/faults", {"error_rate": 0, "rate_429": 0})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--paysim", default=os.path.join(ROOT, ".build", "debug", "paysim"))
    parser.add_argument("--specs", default=os.path.join(ROOT, "Tests", "Fixtures", "paypal-openapi"))
    parser.add_argument("--verbose", action="store_true", help="print every answer's body")
    args = parser.parse_args()
    if not os.access(args.paysim, os.X_OK):
        print(f"validate-paysim-paypal: {args.paysim} is not built (swift build --product paysim)", file=sys.stderr)
        return 2
    checker = Checker(args.specs)
    try:
        with Paysim(args.paysim) as paysim:
            run = Run(paysim, checker, args.verbose)
            drive(run)
    except (RuntimeError, OSError) as error:
        print(f"validate-paysim-paypal: {error}", file=sys.stderr)
        return 2
    by_route = OrderedDict()
    for route, _, _ in run.results:
        by_route[route] = by_route.get(route, 0) + 1
    print("answers by route:")
    for route, count in by_route.items():
        print(f"  {count:4d}  {route}")
    if run.undescribed:
        print(f"{len(run.undescribed)} answers the documents do not describe (not counted)")
    failed = sum(1 for *_, ok in run.results if not ok)
    print(f"{len(run.results)} PayPal answers validated, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
