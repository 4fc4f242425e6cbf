"""``python -m gpubench.prices show [--gpu H100] [--dir DIR]``: the snapshot's date, age and rows;
``python -m gpubench.prices refresh [--out DIR]``: rebuild it through gpuhunt (``gpubench[cloud]``).

Bad input is one paragraph on stderr and exit code 2."""

import argparse
from collections.abc import Callable
from datetime import date, datetime, timezone
from pathlib import Path

from gpubench.prices import SNAPSHOT_DIR, PriceSnapshot, PriceSnapshotError, load_snapshot


def _today() -> date:
    return datetime.now(timezone.utc).date()


def format_snapshot(snapshot: PriceSnapshot, today: date, gpu: str | None = None) -> str:
    """The snapshot as text: its date and age (warned when stale or in the future), each provider's version, then
    one line per offer (of ``gpu`` when given), cheapest per GPU first."""
    age = snapshot.age_days(today)
    days = f"{abs(age)} day{'' if abs(age) == 1 else 's'}"
    lines = [
        f"price snapshot of {snapshot.snapshot_date.isoformat()} "
        + (f"(dated {days} in the future)" if age < 0 else f"({days} old)")
    ]
    stale = snapshot.staleness(today)
    if stale:
        lines.append(f"warning: {stale}")
    for name, entry in snapshot.providers.items():
        lines.append(f"  {name}: {entry.version}; spot: {entry.spot}")
    wanted = gpu.lower() if gpu else None
    offers = [
        offer
        for offer in snapshot.offers
        if wanted is None or offer.gpu_name.lower() == wanted or (offer.card or "").lower() == wanted
    ]
    lines.append(
        f"{'gpu':<8} {'card':<10} {'provider':<11} {'kind':<9} {'gpus':>4} {'USD/h':>10} {'USD/GPU-h':>9} "
        f"{'price date':<10}  instance"
    )
    for offer in sorted(offers, key=lambda o: (o.gpu_name, o.gpu_memory_gb or 0.0, o.usd_per_gpu_hour)):
        lines.append(
            f"{offer.gpu_name:<8} {offer.card or '-':<10} {offer.provider:<11} "
            f"{'spot' if offer.spot else 'on-demand':<9} {offer.gpu_count:>4} {offer.price_usd_per_hour:>10.4f} "
            f"{offer.usd_per_gpu_hour:>9.4f} {offer.price_date.isoformat():<10}  {offer.instance_name}"
        )
    return "\n".join(lines)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="gpubench prices", description="The dated GPU price snapshot gpubench prices trainings with."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("show", help="print the snapshot's date, age and rows")
    show.add_argument("--gpu", help="only this GPU (a catalog name such as H100, or a gpubench card such as h100)")
    show.add_argument("--dir", type=Path, help="a snapshot folder (default: the one shipped with gpubench)")
    refresh = commands.add_parser("refresh", help="rebuild the snapshot through gpuhunt (needs gpubench[cloud])")
    refresh.add_argument("--out", type=Path, default=SNAPSHOT_DIR, help="where to write it (default: the shipped one)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, today: Callable[[], date] = _today) -> int:
    """The command line; returns the exit code. ``today`` is the clock the snapshot's age is judged by."""
    args = _parse(argv)
    from gpubench.output import console

    try:
        if args.command == "show":
            snapshot = load_snapshot(args.dir)
            known = {o.gpu_name.lower() for o in snapshot.offers} | {(o.card or "").lower() for o in snapshot.offers}
            if args.gpu and args.gpu.lower() not in known:
                names = sorted({o.gpu_name for o in snapshot.offers})
                raise PriceSnapshotError(
                    f"--gpu {args.gpu}: the snapshot has no offer of that GPU; it prices {', '.join(names)} "
                    "(or give a gpubench card name such as h100)"
                )
            print(format_snapshot(snapshot, today(), args.gpu))
            return 0
        from gpubench.prices.refresh import RefreshError, refresh

        try:
            entries = refresh(args.out, today())
        except RefreshError as exc:
            raise PriceSnapshotError(str(exc)) from None
        print(f"price snapshot written to {args.out}: " + ", ".join(f"{e.name} ({e.version})" for e in entries))
        return 0
    except PriceSnapshotError as exc:
        console.error(str(exc))
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
