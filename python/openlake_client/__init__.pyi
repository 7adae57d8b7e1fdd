from ._native import (CHECKSUM_MISMATCH as CHECKSUM_MISMATCH, EXISTS as EXISTS,
                      NOSPACE as NOSPACE, NOT_FOUND as NOT_FOUND, OK as OK,
                      TOO_LARGE as TOO_LARGE, Client as Client)
