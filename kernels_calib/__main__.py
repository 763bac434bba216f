"""`python -m kernels_calib`: see kernels_calib.cli (`main` is importable from here too)."""

from kernels_calib.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
