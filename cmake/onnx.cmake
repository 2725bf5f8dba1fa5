# ONNX import: C code for onnx.proto is generated at build time with protoc-c from the
# onnx.proto that Debian's libonnx-dev installs (nothing generated is committed).
