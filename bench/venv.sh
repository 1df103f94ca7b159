# Sourced by bench/ort/compare and bench/models/models: makes sure the
# Python virtual environment with numpy, onnx and onnxruntime exists at
# $venv (TESSERA_ORT_VENV, default target/ort-venv), creating it when missing.
# Expects $root (the repository root); exits 2 with the reason on failure.

venv="${TESSERA_ORT_VENV:-$root/target/ort-venv}"
packages=(numpy onnx "onnxruntime>=1.20")

if ! "$venv/bin/python" -c "import numpy, onnx, onnxruntime" 2>/dev/null; then
    echo "setting up $venv (${packages[*]})" >&2
    if ! python3 -m venv "$venv"; then
        echo "error: could not create a virtual environment at $venv with 'python3 -m venv'" >&2
        echo "       (Debian/Ubuntu: apt install python3-venv; or set TESSERA_ORT_VENV to one that has ${packages[*]})" >&2
        exit 2
    fi
    if ! "$venv/bin/python" -m pip install --quiet "${packages[@]}"; then
        echo "error: could not install ${packages[*]} into $venv (is PyPI reachable?)" >&2
        exit 2
    fi
fi
