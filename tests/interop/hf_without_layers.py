"""A Hugging Face directory's model without its blocks: config.json's num_hidden_layers 0 and the layers' tensors left
out of model.safetensors (the embeddings and the head kept), as a file written elsewhere may be.

    hf_without_layers.py FROM TO

FROM is a Hugging Face directory of one model.safetensors (the standard library reads it: no numpy needed).
"""
import json
import os
import shutil
import struct
import sys


def main():
    source, target = sys.argv[1], sys.argv[2]
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    config = json.load(open(os.path.join(source, "config.json")))
    config["num_hidden_layers"] = 0
    json.dump(config, open(os.path.join(target, "config.json"), "w"), indent=2)
    data = open(os.path.join(source, "model.safetensors"), "rb").read()
    size = struct.unpack("<Q", data[:8])[0]
    header, body = json.loads(data[8:8 + size]), data[8 + size:]
    kept, pieces, offset = {}, [], 0
    for name, entry in header.items():
        if name == "__metadata__":
            kept[name] = entry
            continue
        if ".layer." in name:
            continue
        begin, end = entry["data_offsets"]
        kept[name] = dict(entry, data_offsets=[offset, offset + end - begin])
        pieces.append(body[begin:end])
        offset += end - begin
    text = json.dumps(kept).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(target, "model.safetensors"), "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text + b"".join(pieces))


main()
