#!/usr/bin/env python3
"""Generate proto/schema-digest.json, proto/agent_v1.proto and proto/aiserver_v1.proto.

Two fact sheets describe Cursor's agent.v1 / aiserver.v1 schema as field tables: an older one
and a 2026 addendum listing what a newer extraction adds. Transcribing ~500 tables by hand
invites silent numbering mistakes, so this script reads both, merges them field by field
(stopping on any conflict), writes the merged schema as a digest, and writes the .proto files
from that digest. The sheets live outside the repository; the digest and the .proto files are
committed, and the build uses only the .proto files. docs/proto.md has the whole workflow.

Usage:
  python3 tools/gen_proto.py [--sheet wire-schema.md] [--addendum wire-schema-2026.md]
      read both sheets, write the digest and proto/ (defaults: the sheets in
      $CURSOR_ACP_SHEETS_DIR, when it is set)
  python3 tools/gen_proto.py --from-digest [--out DIR]
      write the .proto files from the committed digest only (into proto/, or DIR)
"""
import argparse
import os
import re
import sys

sys.dont_write_bytecode = True  # nothing left behind in tools/ when the tests run it
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import proto_text  # noqa: E402
import merge_addendum  # noqa: E402
import read_fact_sheet  # noqa: E402
from schema_model import Field, Message, SchemaError, package_of, read_digest, write_digest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIGEST = os.path.join(ROOT, "proto", "schema-digest.json")
# Where the two sheets are kept on a maintainer's machine (they are not in the repository).
SHEETS_DIR = os.environ.get("CURSOR_ACP_SHEETS_DIR")


def add_newer_build_fields(schema):
    """Fields of newer Cursor builds that the older sheet lacks and the addendum does not list
    (it lists only messages with fields missing from proto/, and says these agree with it).

    A generated Connect-ES module, a descriptor dump and a protocol write-up all give
    goal_continuation_action = 18 and inject_context_action = 19, and one client declares
    InjectContextAction{injection_id = 1, expected_run_id = 2, system_context = 4};
    TurnEndedUpdate.reasoning_tokens = 5 is in the senpi/omp proto and the write-up;
    TextDeltaUpdate.is_server_notice = 2 is named by a protocol reference and numbered by the write-up.
    """
    messages = schema.messages
    action = messages["agent.v1.ConversationAction"]
    action.fields.append(Field("goal_continuation_action", 18, "agent.v1.GoalContinuationAction", "oneof", "action"))
    action.fields.append(Field("inject_context_action", 19, "agent.v1.InjectContextAction", "oneof", "action"))
    messages["agent.v1.GoalContinuationAction"] = Message("agent.v1.GoalContinuationAction")
    inject = messages["agent.v1.InjectContextAction"] = Message("agent.v1.InjectContextAction")
    inject.fields = [
        Field("injection_id", 1, "string", "singular"),
        Field("expected_run_id", 2, "string", "singular"),
        Field("system_context", 4, "agent.v1.SystemContextInjection", "oneof", "payload"),
    ]
    system = messages["agent.v1.SystemContextInjection"] = Message("agent.v1.SystemContextInjection")
    system.fields = [Field("producer", 1, "string", "singular"), Field("content", 2, "string", "singular")]
    messages["agent.v1.TurnEndedUpdate"].fields.append(Field("reasoning_tokens", 5, "int64", "optional"))
    messages["agent.v1.TextDeltaUpdate"].fields.append(Field("is_server_notice", 2, "bool", "singular"))


def finish(schema, warn):
    """Checks every message and enum, and gives each enum without one its proto3 zero value."""
    for msg in schema.messages.values():
        numbers, names = {}, set()
        for f in msg.fields:
            if f.number in numbers:
                raise SchemaError("%s: number %d is both %s and %s" % (msg.name, f.number, numbers[f.number], f.name))
            if f.name in names:
                raise SchemaError("%s: two fields are named %s" % (msg.name, f.name))
            numbers[f.number], names = f.name, names | {f.name}
        reused = sorted(set(msg.reserved) & set(numbers))
        if reused:
            warn("%s: %s unused in the older sheet, used in the newer sources" % (
                msg.name, ", ".join("%d (%s)" % (n, numbers[n]) for n in reused)))
        msg.reserved = sorted(set(msg.reserved) - set(numbers))
    for enum in schema.enums.values():
        numbers = [n for _, n in enum.values]
        if len(set(numbers)) != len(numbers):
            raise SchemaError("enum %s: a number is used twice: %s" % (enum.name, enum.values))
        if 0 not in numbers:
            short = enum.name.rsplit(".", 1)[1]
            prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", short).upper()
            enum.values.insert(0, (prefix + "_UNSPECIFIED", 0))
            enum.placeholder_zero = True
    for msg in schema.messages.values():
        package_of(msg.name)


def from_sheets(sheet_path, addendum_path):
    warnings = []
    schema, services, appendix_sizes = read_fact_sheet.read(sheet_path)
    schema.services.update(services)
    add_newer_build_fields(schema)
    merge_addendum.merge(schema, merge_addendum.read(addendum_path), warnings.append)
    finish(schema, warnings.append)
    # The older sheet counts the fields (values) of each type it does not expand: a newer
    # source that fills one should give that many.
    for name, size in appendix_sizes.items():
        item = schema.messages.get(name) or schema.enums[name]
        have = len(item.fields) if name in schema.messages else len(item.values)
        if have < size:
            raise SchemaError("%s: the older sheet counts %d fields or values, the sources give %d" % (name, size, have))
        if have > size:
            warnings.append("%s: %d fields or values where the older sheet counts %d (a newer build adds some)" % (
                name, have, size))
    for w in warnings:
        sys.stderr.write("note: %s\n" % w)
    return schema


def write_protos(schema, out_dir):
    for filename, text in proto_text.render(schema).items():
        path = os.path.join(out_dir, filename)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print("wrote", path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    in_sheets_dir = lambda name: os.path.join(SHEETS_DIR, name) if SHEETS_DIR else None  # noqa: E731
    parser.add_argument("--sheet", default=in_sheets_dir("wire-schema.md"), help="the older fact sheet")
    parser.add_argument("--addendum", default=in_sheets_dir("wire-schema-2026.md"), help="the 2026 addendum")
    parser.add_argument("--from-digest", action="store_true", help="regenerate the .proto files from the digest only")
    parser.add_argument("--out", default=os.path.join(ROOT, "proto"), help="where the .proto files go")
    args = parser.parse_args()
    if not args.from_digest and not (args.sheet and args.addendum):
        parser.error("name both sheets (--sheet, --addendum) or set CURSOR_ACP_SHEETS_DIR")
    try:
        if not args.from_digest:
            schema = from_sheets(args.sheet, args.addendum)
            sources = [os.path.basename(args.sheet), os.path.basename(args.addendum)]
            write_digest(schema, DIGEST, sources)
            print("wrote", DIGEST, "(%d messages, %d fields, %d enums)" % (
                len(schema.messages), sum(len(m.fields) for m in schema.messages.values()), len(schema.enums)))
        schema, _ = read_digest(DIGEST)
        write_protos(schema, args.out)
    except (SchemaError, OSError) as e:
        sys.stderr.write("gen_proto: %s\n" % e)
        sys.exit(1)


if __name__ == "__main__":
    main()
