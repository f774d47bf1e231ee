"""The sweep's measuring instrument on Inductor: recording what a compile meets, timing template choices, capturing
Triton kernels. The ``tuned`` backend never imports this package (``tests/backend/test_reader_imports.py``)."""
