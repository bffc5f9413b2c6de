"""Which RECEIPT frames the reference broker writes once it has handled a client frame:
one for each frame that asks with a receipt header, none for a frame that does not, as the
receipt fault switches bend it. Kept apart from protocol.py, which writes what `after`
returns; the only state is the receipts of the open transactions' frames, which one fault
sends a second time when their transaction ends."""

from __future__ import annotations

from conformance.broker.faults import Faults
from conformance.broker.outgoing import receipt_frame
from conformance.codec import Frame

#: the frames a transaction header puts inside a transaction
TRANSACTIONAL = frozenset({"SEND", "ACK", "NACK"})


class Receipts:
    def __init__(self, faults: Faults) -> None:
        self.faults = faults
        #: transaction -> receipts of its frames (receipts-twice-in-transaction only)
        self._held: dict[str, list[str]] = {}
        self._unasked = 0

    def after(self, frame: Frame, version: str) -> list[Frame]:
        """The RECEIPTs to write now that `frame` (of a `version` session) is handled."""
        faults, command = self.faults, frame.command
        receipt = frame.get("receipt")
        inside = frame.get("transaction") if command in TRANSACTIONAL else None
        out: list[Frame] = []
        if faults.receipts_twice_in_transaction:
            if inside is not None and receipt is not None:
                self._held.setdefault(inside, []).append(receipt)
            elif command in ("COMMIT", "ABORT"):
                out += [receipt_frame(r, faults)
                        for r in self._held.pop(frame.get("transaction") or "", [])]
        if receipt is None:
            if faults.receipt_per_frame or (command == "DISCONNECT"
                                            and faults.receipt_for_unrequested_disconnect):
                self._unasked += 1
                out.append(receipt_frame(f"unasked-{self._unasked}", faults))
            return out
        if faults.drop_receipts or (inside is not None and faults.no_receipt_in_transaction) \
                or (command == "DISCONNECT" and faults.no_receipt_for_disconnect):
            return out
        if faults.receipt_id_as_on_wire and version != "1.0":  # escaped once more
            receipt = receipt.replace("\\", "\\\\").replace(":", "\\c").replace("\n", "\\n")
        out.append(receipt_frame(receipt, faults))
        return out
