#!/usr/bin/env bash
# Generates clients from the served OpenAPI document and uses them, so the document stays
# good enough for generators: a Python client with openapi-python-client (PyPI, in a venv)
# runs a publish -> poll -> ack round trip against a fresh `mailroom serve`, and a
# TypeScript one with openapi-typescript (npm) must type-check (tsc --noEmit) a file that
# uses it. Everything is installed into and generated in a temporary directory.
#
#   scripts/openapi-clients.sh
set -euo pipefail
cd "$(dirname "$0")/.."

work="$(mktemp -d)"
source scripts/fresh-server.sh
cleanup() {
  stop_fresh_server
  rm -rf "$work"
}
trap cleanup EXIT
start_fresh_server "$work"
curl -fsS "$url/openapi.json" -o "$work/openapi.json"

echo "openapi-clients: installing openapi-python-client and openapi-typescript"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet 'openapi-python-client>=0.21,<1'
mkdir -p "$work/ts"
(cd "$work/ts" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund \
  'openapi-typescript@7' 'typescript@5' >/dev/null)

echo "openapi-clients: Python client"
# No post hooks: they would format the code with ruff, which is not needed to run it.
# The batch publish's second body type, the binary encoding (application/vnd.mailroom.batch),
# is one the generator does not know: it warns and generates the JSON body only (mapping
# the type to application/octet-stream made code that does not run), so the check below
# publishes a JSON batch through it.
printf 'post_hooks: []\n' >"$work/generator.yaml"
(cd "$work" && venv/bin/openapi-python-client generate --path openapi.json \
  --meta none --config generator.yaml --output-path mailroom_generated >/dev/null)
MAILROOM_URL="$url" PYTHONPATH="$work" "$work/venv/bin/python" - <<'PY'
import os

from mailroom_generated import Client
from mailroom_generated.api.groups import ack, create_group, poll
from mailroom_generated.api.topics import create_topic, publish, publish_batch
from mailroom_generated.models import BatchRequest, CreateGroup, DeliveryRef
from mailroom_generated.types import File

client = Client(base_url=os.environ["MAILROOM_URL"])
assert create_topic.sync_detailed("orders", client=client).status_code == 201
group = create_group.sync_detailed(
    "orders", "billing", client=client, body=CreateGroup(max_attempts=3)
)
assert group.status_code == 201, group
payload = bytes(range(256))  # every byte: the body is binary, not text
published = publish.sync_detailed("orders", client=client, body=File(payload=payload))
assert published.status_code == 201, published
assert published.parsed.offset == 0, published.parsed
polled = poll.sync_detailed("orders", "billing", client=client)
assert polled.status_code == 200, polled
delivery = polled.parsed
assert delivery.offset == 0 and delivery.attempt == 1, delivery
acked = ack.sync_detailed(
    "orders", "billing", client=client,
    body=DeliveryRef(offset=delivery.offset, attempt=delivery.attempt),
)
assert acked.status_code == 200, acked
again = poll.sync_detailed("orders", "billing", client=client)
assert again.status_code == 204, again
batch = publish_batch.sync_detailed(
    "orders", client=client, body=BatchRequest(messages=["a", "b"])
)
assert batch.status_code == 201, batch
assert batch.parsed.offsets == [1, 2], batch.parsed
print("openapi-clients: Python publish -> poll -> ack round trip and a batch publish ok")
PY

echo "openapi-clients: TypeScript types"
(cd "$work/ts" && npx --no-install openapi-typescript ../openapi.json -o mailroom.ts >/dev/null 2>&1)
cat >"$work/ts/use.ts" <<'TS'
import type { components, paths } from "./mailroom";

type Published = components["schemas"]["Published"];
type PollAnswer =
  paths["/v1/topics/{topic}/groups/{group}/poll"]["post"]["responses"]["200"]["content"]["application/json"];
type ErrorAnswer = components["schemas"]["ErrorBody"];

export const published: Published = { offset: 0 };
export function offsetOf(delivery: PollAnswer): number {
  return delivery.offset;
}
export const failed: ErrorAnswer = { error: "internal", message: "x" };
TS
(cd "$work/ts" && npx --no-install tsc --noEmit --strict --target es2020 --module es2020 \
  --moduleResolution node use.ts)
echo "openapi-clients: TypeScript types check"
