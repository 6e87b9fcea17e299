"""The schema model shared by the sheet readers and the .proto writer, and its digest form.

Names are fully qualified (`agent.v1.InvocationContext.IdeState`), field types too
(`agent.v1.ReadArgs`, `google.protobuf.Value`, `map<string, agent.v1.X>`, or a scalar), so two
sources can be compared without caring how each spelled a type. The digest
(`proto/schema-digest.json`) is this model written out one entry per line: it is what the
sheets list, it is what the .proto files are generated from, and the schema test checks the
compiled descriptors against it.
"""
import json
import re
from collections import OrderedDict

SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float",
           "sint32", "sint64", "fixed32", "fixed64", "sfixed32", "sfixed64"}
WELL_KNOWN = {"google.protobuf.Value", "google.protobuf.Struct"}
PACKAGES = {"agent.v1": "agent_v1.proto", "aiserver.v1": "aiserver_v1.proto"}
LABELS = {"singular", "optional", "repeated", "map", "oneof"}


class SchemaError(Exception):
    """The sources disagree or cannot be read; the message says where."""


class Field:
    __slots__ = ("name", "number", "type", "label", "oneof")

    def __init__(self, name, number, type_, label, oneof=None):
        assert label in LABELS, label
        self.name, self.number, self.type, self.label, self.oneof = name, number, type_, label, oneof

    def row(self):
        return [self.name, self.number, self.type, self.label, self.oneof]

    def describe(self):
        where = "oneof %s" % self.oneof if self.oneof else self.label
        return "%s = %d (%s, %s)" % (self.name, self.number, self.type, where)


class Message:
    def __init__(self, name, note=None):
        self.name = name
        self.fields = []
        self.reserved = []
        self.note = note  # why it has no fields, when it has none for want of a source

    def field_by_number(self, number):
        return next((f for f in self.fields if f.number == number), None)

    def field_by_name(self, name):
        return next((f for f in self.fields if f.name == name), None)


class Enum:
    def __init__(self, name):
        self.name = name
        self.values = []            # [(value name, number)]
        self.placeholder_zero = False  # the zero value is ours: proto3 needs one, no source names it


class Method:
    __slots__ = ("name", "input", "output", "client_streaming", "server_streaming")

    def __init__(self, name, input_, output, client_streaming, server_streaming):
        self.name, self.input, self.output = name, input_, output
        self.client_streaming, self.server_streaming = client_streaming, server_streaming

    def row(self):
        return [self.name, ("stream " if self.client_streaming else "") + self.input,
                ("stream " if self.server_streaming else "") + self.output]


class Schema:
    def __init__(self):
        self.messages = OrderedDict()   # full name -> Message
        self.enums = OrderedDict()      # full name -> Enum
        self.services = OrderedDict()   # full name -> [Method]

    def symbols(self):
        return set(self.messages) | set(self.enums) | WELL_KNOWN


def package_of(full_name):
    for package in PACKAGES:
        if full_name.startswith(package + "."):
            return package
    raise SchemaError("%s is in no package of proto/" % full_name)


def parent_of(full_name):
    """The message a nested type is declared in, or None for a top-level type."""
    package = package_of(full_name)
    rest = full_name[len(package) + 1:]
    return None if "." not in rest else full_name.rsplit(".", 1)[0]


def _package_prefixes():
    out = set()
    for package in list(PACKAGES) + ["google.protobuf"]:
        parts = package.split(".")
        out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return out


PACKAGE_PREFIXES = _package_prefixes()


def resolve(ref, scope, symbols):
    """Protobuf's name resolution: the full name `ref` denotes when written inside `scope`
    (a package or message full name), or None. Like protoc, the first component is looked up
    from the innermost scope outwards and the rest must then exist below it."""
    if ref.startswith("."):
        return ref[1:] if ref[1:] in symbols else None
    first, _, rest = ref.partition(".")
    parts = scope.split(".") if scope else []
    for i in range(len(parts), -1, -1):
        candidate = ".".join(parts[:i] + [first])
        if candidate in symbols or candidate in PACKAGE_PREFIXES:
            full = candidate + ("." + rest if rest else "")
            return full if full in symbols else None
    return None


def resolve_type(type_, scope, symbols):
    """A sheet's type cell (scalar, message/enum name, map) in full-name form, or None."""
    m = re.match(r"^map<\s*(\w+)\s*,\s*(.+?)\s*>$", type_)
    if m:
        value = resolve_type(m.group(2), scope, symbols)
        return None if value is None else "map<%s, %s>" % (m.group(1), value)
    if type_ in SCALARS:
        return type_
    return resolve(type_, scope, symbols)


def spell(full_type, scope, symbols):
    """How to write `full_type` inside `scope`: relative to the package where that resolves to
    it (as the sheets write types), else its full name, else with a leading dot."""
    m = re.match(r"^map<(\w+), (.+)>$", full_type)
    if m:
        return "map<%s, %s>" % (m.group(1), spell(m.group(2), scope, symbols))
    if full_type in SCALARS:
        return full_type
    candidates = [full_type]
    for package in PACKAGES:
        if full_type.startswith(package + ".") and scope.startswith(package):
            candidates.insert(0, full_type[len(package) + 1:])
    for candidate in candidates:
        if resolve(candidate, scope, symbols) == full_type:
            return candidate
    return "." + full_type


# ---------- the digest ----------

DIGEST_NOTE = ("Generated by tools/gen_proto.py from Cursor's wire-schema fact sheets (see docs/proto.md); "
               "do not edit. proto/*.proto are generated from this file, and the schema test checks the "
               "compiled descriptors against it.")


def write_digest(schema, path, sources):
    """One JSON entry per line, so a change to the schema is a readable diff."""
    def dump(value):
        return json.dumps(value, ensure_ascii=False)

    out = ["{", '  "note": %s,' % dump(DIGEST_NOTE), '  "sources": %s,' % dump(sources), '  "enums": {']
    items = []
    for enum in schema.enums.values():
        head = '    %s: {"placeholder_zero": %s, "values": [' % (dump(enum.name), dump(enum.placeholder_zero))
        values = ",\n".join("      %s" % dump([v, n]) for v, n in enum.values)
        items.append(head + "\n" + values + "\n    ]}")
    out.append(",\n".join(items))
    out += ["  },", '  "messages": {']
    items = []
    for msg in schema.messages.values():
        head = "    %s: {" % dump(msg.name)
        parts = []
        if msg.note:
            parts.append('"note": %s' % dump(msg.note))
        if msg.reserved:
            parts.append('"reserved": %s' % dump(sorted(msg.reserved)))
        if msg.fields:
            rows = ",\n".join("      %s" % dump(f.row()) for f in msg.fields)
            parts.append('"fields": [\n' + rows + "\n    ]")
        else:
            parts.append('"fields": []')
        items.append(head + ", ".join(parts) + "}")
    out.append(",\n".join(items))
    out += ["  },", '  "services": {']
    items = []
    for name, methods in schema.services.items():
        rows = ",\n".join("      %s" % dump(m.row()) for m in methods)
        items.append("    %s: [\n%s\n    ]" % (dump(name), rows))
    out.append(",\n".join(items))
    out += ["  }", "}"]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


def read_digest(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f, object_pairs_hook=OrderedDict)
    schema = Schema()
    for name, body in data["enums"].items():
        enum = schema.enums[name] = Enum(name)
        enum.values = [(v, n) for v, n in body["values"]]
        enum.placeholder_zero = body["placeholder_zero"]
    for name, body in data["messages"].items():
        msg = schema.messages[name] = Message(name, body.get("note"))
        msg.reserved = list(body.get("reserved", []))
        msg.fields = [Field(*row) for row in body["fields"]]
    for name, rows in data["services"].items():
        methods = schema.services[name] = []
        for method, input_, output in rows:
            cs, ss = input_.startswith("stream "), output.startswith("stream ")
            methods.append(Method(method, input_.replace("stream ", ""), output.replace("stream ", ""), cs, ss))
    return schema, data.get("sources", [])
