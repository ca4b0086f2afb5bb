#!/usr/bin/env bash
# Tests the Python and TypeScript clients against real `mailroom serve` processes: each
# test starts its own server (the restart tests kill -9 it mid-consume and start it again
# on the same data directory and port). Both run the shared behaviour suite in
# clients/behaviour, as `cargo test -p mailroom-cli --test client_behaviour` does for the
# Rust client.
#
# - Python: `pip install ./clients/python` into a fresh venv (httpx and websockets from
#   PyPI), `mypy --strict` over its sources, then pytest (sync and asyncio clients).
# - TypeScript: `npm ci` (the dev dependency typescript), a rebuild that must match the
#   committed dist/, `node --test`; then `npm install ./clients/typescript` into an empty
#   project, which must import, type-check and talk to a server.
#
#   scripts/clients-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"

work="$(mktemp -d)"
source scripts/fresh-server.sh
cleanup() {
  stop_fresh_server
  rm -rf "$work"
}
trap cleanup EXIT
build_server_binary
export MAILROOM_BIN="$mailroom_bin"

echo "clients: Python (pip install ./clients/python, pytest)"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet ./clients/python 'pytest>=7' 'mypy>=1.8'
# The package ships py.typed: its sources must type-check under --strict.
"$work/venv/bin/mypy" --strict --no-incremental clients/python/src/mailroom
# From the temporary directory, so the installed package is tested, not the source tree.
(cd "$work" && "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$repo/clients/python/tests")

echo "clients: TypeScript (npm ci, build matches dist/, node --test)"
# Node 20 has a global WebSocket only behind a flag; later versions have it anyway.
ws_flag=""
if [ "$(node -e 'process.stdout.write(typeof WebSocket)')" = "undefined" ]; then
  ws_flag="--experimental-websocket"
fi
(
  cd clients/typescript
  npm ci --silent --no-audit --no-fund
  npx --no-install tsc -p tsconfig.json --outDir "$work/dist"
  diff -r dist "$work/dist" || { echo "clients/typescript/dist is stale: npm run build" >&2; exit 1; }
  node $ws_flag --test test/*.test.mjs
)

echo "clients: npm install ./clients/typescript into an empty project"
mkdir -p "$work/app"
start_fresh_server "$work"
(
  cd "$work/app"
  npm init -y >/dev/null
  npm install --silent --no-audit --no-fund "$repo/clients/typescript"
  npm pkg set type=module >/dev/null
  cat >use.ts <<'TS'
import { Client, NotOwned, type Delivery } from "mailroom";

export async function firstOffset(client: Client): Promise<number | null> {
  const delivery: Delivery | null = await client.poll("orders", "billing");
  return delivery === null ? null : delivery.offset;
}
export const refused: typeof NotOwned = NotOwned;
TS
  "$repo/clients/typescript/node_modules/.bin/tsc" --noEmit --strict --target es2022 \
    --module node16 --moduleResolution node16 --skipLibCheck use.ts
  MAILROOM_URL="$url" node $ws_flag --input-type=module -e '
    import { Client } from "mailroom";
    const client = new Client(process.env.MAILROOM_URL);
    await client.createTopic("orders");
    await client.createGroup("orders", "billing", { max_attempts: 3 });
    await client.publish("orders", new Uint8Array([0, 255]));
    const delivery = await client.poll("orders", "billing");
    if (delivery.payload[1] !== 255 || (await client.ack("orders", "billing", delivery)) !== "acked") {
      throw new Error("round trip failed");
    }
    console.log("clients: the installed package round-trips");
  '
)
echo "clients: ok"
