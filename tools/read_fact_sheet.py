"""Reads the older wire fact sheet (wire-schema.md) into the schema model.

That sheet lists every message it expands as a field table with exact numbers, types, labels
and oneofs, the ToolCall wrappers as one overview table, enums as value tables, the services as
an RPC table, and in Appendix A the types it references without expanding them (declared empty
here, until a newer sheet fills them). Types are written as protobuf would resolve them inside
the message that uses them.
"""
import re
from collections import OrderedDict

from schema_model import Enum, Field, Message, Method, Schema, SchemaError, SCALARS, WELL_KNOWN, resolve_type

# Messages of the aiserver.v1 package; everything else in the sheet is agent.v1.
AISERVER = {"BidiRequestId", "BidiAppendRequest", "BidiAppendResponse", "BidiPollRequest",
            "BidiPollResponse", "ErrorDetails", "CustomErrorDetails", "ErrorButton", "PlanChoice",
            "ErrorAnalyticsMetadata"}
HEADING = re.compile(r"^[A-Z][A-Za-z0-9_]*(\.[A-Z][A-Za-z0-9_]*)?$")


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def clean_type(t):
    """The sheet's type cell without its markup: backticks and "(not expanded)" notes."""
    t = re.sub(r"\s*\((msg|enum), not expanded\)", "", t)
    t = re.sub(r"\s*\(n/e\)", "", t)
    t = t.replace("`", "").strip()
    m = re.match(r"^map<\s*(\w+)\s*,\s*(.+)>$", t)
    if m:
        return "map<%s, %s>" % (m.group(1), clean_type(m.group(2)))
    return t


def qualify(name):
    return ("aiserver.v1." if name.split(".")[0] in AISERVER else "agent.v1.") + name


class _Raw:
    """A message as the sheet writes it: types not yet resolved."""

    def __init__(self, name):
        self.name = name
        self.fields = []     # (name, number, type as written, label, oneof)
        self.reserved = []
        self.note = None


def read(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    messages = OrderedDict()
    enums = OrderedDict()
    opaque = OrderedDict()       # Appendix A: name -> 'message' | 'enum'
    wrappers = []                # ToolCall overview rows: (wrapper, args, result, other fields)
    empties = set()              # headings whose table is declared empty
    current = None               # ('msg' | 'enum', name)
    last_heading = None
    in_appendix = False
    for line in lines:
        if line.startswith("## Appendix A"):
            in_appendix = True
        h = re.match(r"^### (enum )?(\S+)\s*$", line)
        if h and not in_appendix:
            name = h.group(2)
            last_heading = name
            current = ("enum" if h.group(1) else "msg", name) if HEADING.match(name) else None
            if current and current[0] == "msg":
                messages.setdefault(name, _Raw(name))
            if current and current[0] == "enum":
                enums.setdefault(name, [])
        if "*(no fields — empty message)*" in line and last_heading:
            empties.add(last_heading)
        ne = re.match(r"^Nested enum `([A-Za-z0-9_.]+)`:", line)
        if ne:
            current = ("enum", ne.group(1))
            enums.setdefault(ne.group(1), [])
        if line.startswith("| ") and current is not None and not in_appendix:
            c = cells(line)
            if current[0] == "msg" and len(c) == 5 and re.match(r"^\d+$", c[1]):
                label, oneof = c[3], None
                m = re.match(r"^oneof `(\w+)`$", label)
                if m:
                    label, oneof = "oneof", m.group(1)
                messages[current[1]].fields.append((c[0], int(c[1]), clean_type(c[2]), label, oneof))
            elif current[0] == "msg" and len(c) == 6 and re.match(r"^\d+$", c[1]) and current[1] == "ToolCall":
                messages["ToolCall"].fields.append((c[0], int(c[1]), clean_type(c[2]), "oneof", "tool"))
                wrappers.append((clean_type(c[2]), clean_type(c[3]), clean_type(c[4]), c[5]))
            elif current[0] == "enum" and len(c) == 2 and re.match(r"^-?\d+$", c[1]):
                enums[current[1]].append((c[0], int(c[1])))
        if line.startswith("Numbers not used") and current and current[0] == "msg":
            messages[current[1]].reserved.extend(int(n) for n in re.findall(r"\d+", line.split(":", 1)[1]))
        if in_appendix and line.startswith("| `"):
            c = cells(line)
            opaque[c[0].strip("`")] = (c[1], c[2])

    # The sheet's ToolCall table: a wrapper without a table of its own has args = 1 and
    # result = 2 ("unless stated otherwise in the last column").
    wrapper_names = {w[0] for w in wrappers}
    for wrapper, args, result, other in wrappers:
        if wrapper in messages and messages[wrapper].fields:
            continue
        msg = messages.setdefault(wrapper, _Raw(wrapper))
        if args != "—":
            msg.fields.append(("args", 1, args, "singular", None))
        if result != "—":
            msg.fields.append(("result", 2, result, "singular", None))
        if other != "—":
            for part in other.split(";"):
                m = re.match(r"^\s*(optional\s+)?(\w+)\s+(\w+)\s*=\s*(\d+)\s*$", part)
                if not m:
                    raise SchemaError("ToolCall table: cannot read wrapper field %r of %s" % (part, wrapper))
                msg.fields.append((m.group(3), int(m.group(4)), m.group(2),
                                   "optional" if m.group(1) else "singular", None))
        msg.fields.sort(key=lambda f: f[1])

    # Headings that were not messages (no table, not declared empty, not a wrapper).
    for name in list(messages):
        if not messages[name].fields and name not in empties and name not in wrapper_names:
            del messages[name]

    # Appendix A types are declared empty (an enum gets only its zero value) until a newer
    # source fills them; the appendix says how many fields or values each has.
    sizes = {}
    for name, (kind, size) in opaque.items():
        if kind == "enum":
            enums.setdefault(name, [])
        elif name not in messages:
            messages[name] = _Raw(name)
            if size != "empty":
                messages[name].note = "no source lists its fields (the older sheet names it without expanding it)"
        sizes[qualify(name)] = 0 if size == "empty" else int(size.split()[0])

    # Newer builds add the binary form of the append payload, number 4 (named by Cursor's
    # protocol write-ups; the sheet's source file predates it).
    messages["BidiAppendRequest"].fields.append(("data_binary", 4, "bytes", "singular", None))
    return _resolved(messages, enums), _services(lines), sizes


def _resolved(messages, enums):
    schema = Schema()
    for name, values in enums.items():
        enum = schema.enums[qualify(name)] = Enum(qualify(name))
        enum.values = list(values)
    for name, raw in messages.items():
        msg = schema.messages[qualify(name)] = Message(qualify(name), raw.note)
        msg.reserved = list(raw.reserved)
    # Types used but defined nowhere (not even in Appendix A) are declared empty as well.
    pending = list(messages.items())
    while pending:
        name, raw = pending.pop(0)
        msg = schema.messages[qualify(name)]
        for fname, number, type_, label, oneof in raw.fields:
            full = resolve_type(type_, msg.name, schema.symbols())
            if full is None:
                bare = re.sub(r"^map<\w+, (.+)>$", r"\1", type_)
                if bare in SCALARS or bare in WELL_KNOWN or not re.match(r"^[A-Z]\w*$", bare):
                    raise SchemaError("%s.%s: cannot resolve type %r" % (name, fname, type_))
                schema.messages[qualify(bare)] = Message(qualify(bare), "no source lists its fields (the older sheet only uses it as a type)")
                full = resolve_type(type_, msg.name, schema.symbols())
            if label == "map":
                pass
            elif full.startswith("map<"):
                label = "map"
            msg.fields.append(Field(fname, number, full, label, oneof))
    return schema


def _services(lines):
    """The RPC table: service -> [Method]. A row naming several methods gives them all the
    `<Method>Request` / `<Method>Response` pattern."""
    services = OrderedDict()
    in_table = False
    for line in lines:
        if line.startswith("| service (full name) | method |"):
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            break
        if not in_table or line.startswith("|---"):
            continue
        service, methods, request, response, kind = [c.replace("`", "") for c in cells(line)[:5]]
        client_streaming, server_streaming = kind.startswith("bidi"), kind.startswith(("bidi", "server"))
        for method in [m.strip() for m in methods.split(",")]:
            package = service.rsplit(".", 1)[0]
            req = request.replace("<Method>", method).replace("stream ", "").strip()
            resp = response.replace("<Method>", method).replace("stream ", "").strip()
            req = req if "." in req else package + "." + req
            resp = resp if "." in resp else package + "." + resp
            services.setdefault(service, []).append(Method(method, req, resp, client_streaming, server_streaming))
    return services
