D=/work/main/.venv/lib/python3.11/site-packages/dace
AP=/tmp/fpga_probe/aptypes/hls4ml/templates/vivado/ap_types
SYS=/tmp/fpga_probe/sysroot/usr
INC="-I$D/runtime/include -I$D/external/hlslib/include -I$AP -I$SYS/include -I/tmp/fpga_probe/stubs"
