"""Reads the 2026 addendum sheet (wire-schema-2026.md) and merges it into the schema model.

The addendum lists, per message, either all its fields (a message new to proto/, or one
declared empty there) or all its rows with the missing ones marked **new**; per enum the values
missing from proto/; and the AgentService rpcs. Its types are written relative to the agent.v1
package. Where both sources define a message they are merged field by field: a field number
both know must have the same name, type, label and oneof in both, or the merge stops, unless the
difference is one of WIRE_COMPATIBLE below, resolved there with the reason.
"""
import re
from collections import OrderedDict

from schema_model import Enum, Field, Message, Method, SchemaError, resolve, resolve_type

# Differences between the sources that do not change the bytes on the wire, each resolved
# explicitly: (message, field number) -> (type in the older sources, type in the 2026 sheet,
# the one kept, why). Anything else that differs stops the merge.
HARNESS = ("string", "bytes", "string",
           "harness: string and bytes are both length-delimited, so the wire does not change; in "
           "proto3 JSON (which hosts read and write) a string stays text where bytes would become "
           "base64, so the older type is kept")
WIRE_COMPATIBLE = {
    ("agent.v1.AgentRunRequest", 13): HARNESS,
    ("agent.v1.PrewarmRequest", 13): HARNESS,
    ("agent.v1.ConversationStateStructure", 30): (
        "map<string, agent.v1.SubagentRun>", "map<string, agent.v1.SubagentRunState>",
        "map<string, agent.v1.SubagentRunState>",
        "subagent_runs_by_parent_tool_call_id: SubagentRun and SubagentRunState have the same "
        "fields (numbers, names, types, labels), so only the message's name differs, which is on "
        "neither the wire nor in JSON. The 2026 source is Cursor's own schema and the older sheet "
        "says SubagentRun was added by its source's author, so the field takes the newer name; "
        "SubagentRun stays declared as the older sheet lists it"),
}


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def clean_type(t):
    t = t.replace("`", "").strip()
    m = re.match(r"^map<\s*(\w+)\s*,\s*(.+?)\s*>$", t)
    return "map<%s, %s>" % (m.group(1), clean_type(m.group(2))) if m else t


class Addendum:
    def __init__(self):
        self.messages = OrderedDict()  # name -> {"status": str, "rows": [(name, n, type, label, oneof, new)]}
        self.enums = OrderedDict()     # name -> {"status": str, "values": [(name, n)]}
        self.rpcs = []                 # (method, request, response, client streaming, server streaming)


def read(path):
    sheet = Addendum()
    section, current = None, None
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for line in lines:
        if line.startswith("## "):
            section, current = line[3:].strip(), None
            continue
        h = re.match(r"^### (enum )?([A-Z][A-Za-z0-9_.]*)\s*$", line)
        if h:
            target = sheet.enums if h.group(1) else sheet.messages
            if h.group(2) in target:
                raise SchemaError("2026 sheet: %s is listed twice" % h.group(2))
            current = (("enum" if h.group(1) else "msg"), h.group(2))
            target[h.group(2)] = {"status": None, "rows": [], "values": []}
            continue
        if current and line and not line.startswith("|"):
            entry = (sheet.enums if current[0] == "enum" else sheet.messages)[current[1]]
            entry["status"] = entry["status"] or line.strip()
            continue
        if not line.startswith("| ") or line.startswith("|---"):
            continue
        c = cells(line)
        if section == "Services" and len(c) == 4 and c[0] != "rpc":
            streams = [x.startswith("stream ") for x in (c[1], c[2])]
            request, response = (clean_type(x.replace("stream ", "", 1)) for x in (c[1], c[2]))
            if c[3].strip("`") != "/agent.v1.AgentService/%s" % c[0]:
                raise SchemaError("2026 sheet: rpc %s has path %s" % (c[0], c[3]))
            sheet.rpcs.append((c[0], request, response, streams[0], streams[1]))
        elif current and current[0] == "msg" and len(c) == 5 and re.match(r"^\d+$", c[1]):
            label, oneof = c[3], None
            m = re.match(r"^oneof `(\w+)`$", label)
            if m:
                label, oneof = "oneof", m.group(1)
            new = {"": False, "**new**": True}.get(c[4])
            if new is None:
                raise SchemaError("2026 sheet: %s.%s has status %r" % (current[1], c[0], c[4]))
            sheet.messages[current[1]]["rows"].append((c[0], int(c[1]), clean_type(c[2]), label, oneof, new))
        elif current and current[0] == "enum" and len(c) == 2 and re.match(r"^-?\d+$", c[1]):
            sheet.enums[current[1]]["values"].append((c[0], int(c[1])))
    return sheet


NOT_YET, DECLARED_EMPTY, PARTLY = "Not in proto/ yet.", "Declared empty in proto/ today", "In proto/ already"


def merge(schema, sheet, warn):
    """Adds the addendum to `schema`. Conflicts raise SchemaError; claims of the sheet about
    today's proto/ that do not hold (a row said to be new that is there already, or the
    reverse) are passed to `warn`, since the fields themselves still agree."""
    for name in sheet.enums:
        full = "agent.v1." + name
        schema.enums.setdefault(full, Enum(full))
    for name in sheet.messages:
        full = "agent.v1." + name
        if full not in schema.messages:
            schema.messages[full] = Message(full)
    for name in sheet.messages:
        parent = ("agent.v1." + name).rsplit(".", 1)[0]
        if "." in name and parent not in schema.messages:
            raise SchemaError("2026 sheet: %s is nested in %s, which no source defines" % (name, parent))
    symbols = schema.symbols()

    for name, entry in sheet.messages.items():
        msg = schema.messages["agent.v1." + name]
        status = entry["status"] or ""
        had_fields = bool(msg.fields)
        if status.startswith((NOT_YET, DECLARED_EMPTY)) and had_fields:
            warn("%s: the 2026 sheet says it is %r, but proto/ has %d fields" % (name, status, len(msg.fields)))
        if entry["rows"] or status.startswith(DECLARED_EMPTY) or status.startswith(NOT_YET):
            msg.note = None
        for fname, number, type_, label, oneof, new in entry["rows"]:
            full_type = resolve_type(type_, "agent.v1", symbols)
            if full_type is None:
                raise SchemaError("2026 sheet: %s.%s has type %r, which no source defines" % (name, fname, type_))
            if full_type.startswith("map<"):
                label = "map"
            field = Field(fname, number, full_type, label, oneof)
            existing = msg.field_by_number(number)
            if existing is None:
                if msg.field_by_name(fname) is not None:
                    raise SchemaError("%s: the 2026 sheet has %s, the older sources have %s" % (
                        name, field.describe(), msg.field_by_name(fname).describe()))
                if status.startswith(PARTLY) and not new:
                    warn("%s.%s = %d: listed as in proto/ already, but it is not" % (name, fname, number))
                msg.fields.append(field)
                continue
            if new:
                warn("%s.%s = %d: marked new, but proto/ has it already" % (name, fname, number))
            if existing.row() != field.row():
                _resolve_difference(msg.name, existing, field)

    for name, entry in sheet.enums.items():
        enum = schema.enums["agent.v1." + name]
        for value, number in entry["values"]:
            same_number = [v for v, n in enum.values if n == number]
            same_name = [n for v, n in enum.values if v == value]
            if same_number and same_number != [value] or same_name and same_name != [number]:
                raise SchemaError("enum %s: the 2026 sheet has %s = %d, the older sources %s" % (
                    name, value, number, ", ".join("%s = %d" % vn for vn in enum.values
                                                   if vn[0] == value or vn[1] == number)))
            if not same_number:
                enum.values.append((value, number))

    _merge_services(schema, sheet.rpcs, symbols)


def _resolve_difference(message, ours, theirs):
    """Applies the WIRE_COMPATIBLE resolution for a field both sources define differently, or
    stops: name, number, label and oneof must agree, and the types be the ones listed."""
    known = WIRE_COMPATIBLE.get((message, ours.number))
    if known and (ours.type, theirs.type) == known[:2] and (ours.name, ours.label, ours.oneof) == (
            theirs.name, theirs.label, theirs.oneof):
        ours.type = known[2]
        return
    raise SchemaError("%s field %d: the older sources have %s, the 2026 sheet has %s.\n"
                      "Check which is right; if the difference is wire-compatible, resolve it in "
                      "WIRE_COMPATIBLE (tools/merge_addendum.py) with the reason." % (
                          message, ours.number, ours.describe(), theirs.describe()))


def _merge_services(schema, rpcs, symbols):
    """The addendum's AgentService table, checked against the older sheet's rpc table. A
    request or response message that no source defines is declared empty."""
    service = "agent.v1.AgentService"
    known = OrderedDict((m.name, m) for m in schema.services.get(service, []))
    merged = []
    for method, request, response, client_streaming, server_streaming in rpcs:
        ends = []
        for name in (request, response):
            full = resolve(name, "agent.v1", symbols) or resolve(name, "aiserver.v1", symbols)
            if full is None:
                full = "agent.v1." + name
                schema.messages[full] = Message(full, "no source lists its fields (the rpc tables name it)")
                symbols.add(full)
            ends.append(full)
        m = Method(method, ends[0], ends[1], client_streaming, server_streaming)
        old = known.pop(method, None)
        if old is not None and old.row() != m.row():
            raise SchemaError("AgentService.%s: the older sheet has %s, the 2026 sheet %s" % (method, old.row(), m.row()))
        merged.append(m)
    if known:
        raise SchemaError("AgentService: the older sheet has %s, the 2026 sheet does not" % ", ".join(known))
    schema.services[service] = merged
