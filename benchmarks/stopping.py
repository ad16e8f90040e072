"""A signal that stops a benchmark driver (a `timeout`, Ctrl-C, a closed
terminal) raised as an exception, so the driver unwinds: the ranks it
launched are killed, its namespaces and temporary files removed, and the
rounds complete before it still reported. Python's default would end the
driver alone, leaving a launcher in a session of its own (compare.py's) and
its ranks spinning on the cores, and network namespaces behind."""
import signal


class stopped_by_signal(Exception):
    """SIGTERM, SIGINT or SIGHUP reached the driver; str() names it."""


def stop_on_signals():
    def handler(number, _frame):
        raise stopped_by_signal(signal.Signals(number).name)
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, handler)
