"""A scratch server stops once the process that started it is gone, even one killed outright."""

import logging
import subprocess
import sys
import threading

from chhttp.__main__ import watch_parent


def test_the_watch_stops_the_server_when_its_process_is_gone():
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stop = threading.Event()
    orphaned = threading.Event()
    watch = threading.Thread(
        target=watch_parent, args=(parent.pid, stop, logging.getLogger("t"), orphaned), daemon=True
    )
    watch.start()
    # Alive: the server keeps serving.
    assert not stop.wait(2.5)
    parent.kill()
    parent.wait()
    assert stop.wait(120), "the server did not notice its process was gone"
    # Stopped because its process is gone: it removes its own directory then.
    assert orphaned.is_set()
    watch.join(120)
    assert not watch.is_alive()
