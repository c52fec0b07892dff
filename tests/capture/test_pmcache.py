"""The PM sampling config image cached on disk (ls_pmcache), through the
_testhooks._pmcache test hook: no GPU needed.  A new process reads the image its
chip, metric set, CUPTI version and counter availability made; any change
of those reads another file, and a bad file is ignored with a sentence."""
from __future__ import annotations

import os

import pytest

from loopscope import _testhooks
from loopscope.live import _settings

NAMES = ["sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
         "dram__throughput.avg.pct_of_peak_sustained_elapsed", "pcie__read_bytes.sum"]
AVAIL = bytes(range(64))
IMAGE = bytes((i * 7) % 256 for i in range(5000))
KEPT = [True, True, False]


def key(folder, chip="GH100", names=NAMES, version=130001, availability=AVAIL):
    return dict(folder=str(folder), chip=chip, names=names, cupti_version=version,
                availability=availability)


def test_an_image_comes_back_as_it_was_stored(tmp_path):
    folder = tmp_path / "a" / "b"  # made on the way
    path = _testhooks._pmcache("store", **key(folder), kept=KEPT, image=IMAGE)
    assert os.path.dirname(path) == str(folder) and os.path.basename(path).startswith("pmconfig-GH100-")
    assert _testhooks._pmcache("load", **key(folder)) == (1, KEPT, IMAGE, None)
    assert not [f for f in os.listdir(folder) if ".tmp." in f]  # written by rename


@pytest.mark.parametrize("change", [
    {"chip": "GB100"},
    {"names": NAMES[:2]},
    {"names": list(reversed(NAMES))},
    {"version": 130002},
    {"availability": AVAIL[:-1] + b"\xff"},
])
def test_a_new_chip_metric_set_cupti_or_availability_misses(tmp_path, change):
    _testhooks._pmcache("store", **key(tmp_path), kept=KEPT, image=IMAGE)
    other = key(tmp_path, **change)
    assert _testhooks._pmcache("path", **other) != _testhooks._pmcache("path", **key(tmp_path))
    assert _testhooks._pmcache("load", **other) == (0, None, None, None)


def test_a_file_of_another_key_under_this_name_is_ignored_with_a_note(tmp_path):
    stored = _testhooks._pmcache("store", **key(tmp_path, chip="GB100"), kept=KEPT, image=IMAGE)
    os.replace(stored, _testhooks._pmcache("path", **key(tmp_path)))
    found, kept, image, note = _testhooks._pmcache("load", **key(tmp_path))
    assert (found, kept, image) == (-1, None, None)
    assert "another chip, metric set, CUPTI or counter availability" in note


@pytest.mark.parametrize("damage, words", [
    (lambda data: data[:-1], "cut short"),
    (lambda data: data[:len(data) // 2], "cut short"),
    (lambda data: data[:-100] + bytes([data[-100] ^ 1]) + data[-99:], "checksum"),
    (lambda data: b"garbage!" + data[8:], "not a loopscope PM config file"),
])
def test_a_damaged_file_is_ignored_with_a_note(tmp_path, damage, words):
    path = _testhooks._pmcache("store", **key(tmp_path), kept=KEPT, image=IMAGE)
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(damage(data))
    found, kept, image, note = _testhooks._pmcache("load", **key(tmp_path))
    assert (found, kept, image) == (-1, None, None)
    assert words in note and path in note


def test_storing_again_replaces_a_damaged_file(tmp_path):
    path = _testhooks._pmcache("store", **key(tmp_path), kept=KEPT, image=IMAGE)
    with open(path, "wb") as f:
        f.write(b"x")
    _testhooks._pmcache("store", **key(tmp_path), kept=[True, False, False], image=IMAGE[:100])
    assert _testhooks._pmcache("load", **key(tmp_path)) == (1, [True, False, False], IMAGE[:100], None)


def test_an_unwritable_folder_is_a_note_not_a_crash(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(OSError, match="could not be made"):
        _testhooks._pmcache("store", **key(blocker / "sub"), kept=KEPT, image=IMAGE)


def test_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setattr(_settings, "_cache", {})
    monkeypatch.setenv("LOOPSCOPE_CACHE_DIR", str(tmp_path))
    assert _settings.cache_dir() == str(tmp_path)
    monkeypatch.setattr(_settings, "_cache", {})
    monkeypatch.setenv("LOOPSCOPE_CACHE_DIR", "off")
    assert _settings.cache_dir() is None
    monkeypatch.setattr(_settings, "_cache", {})
    monkeypatch.delenv("LOOPSCOPE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _settings.cache_dir() == str(tmp_path / "xdg" / "loopscope")


def test_internal_switches_parse_and_bad_ones_are_named():
    """Two switches are left, for diagnosis (issue 43 deleted those that lost)."""
    assert _settings.parse_internal("callbacks=0, own_timestamps=1") == {
        "callbacks": False, "own_timestamps": True}
    assert _settings.parse_internal("") == {}
    for bad, words in [("callbacks=yes", "0 or 1"), ("turbo=1", "names no switch"),
                       ("own_timestamps", "key=value"), ("overlap=1", "names no switch"),
                       ("metrics_keep_running_ms=100", "names no switch")]:
        with pytest.raises(ValueError, match=words) as error:
            _settings.parse_internal(bad)
        assert "LOOPSCOPE_INTERNAL" in str(error.value)


def test_warm_up_is_once_per_process(monkeypatch):
    """Profile(warm_up=True) asks the core for one warm-up per process (2),
    warm_up=False for none (0)."""
    monkeypatch.setattr(_settings, "_cache", {})
    monkeypatch.delenv("LOOPSCOPE_INTERNAL", raising=False)
    assert _settings.core_options(True)["warm_up"] == 2
    assert _settings.core_options(False)["warm_up"] == 0


def test_a_profile_reports_the_warm_up_mode_it_ran_with(monkeypatch):
    import loopscope

    monkeypatch.setattr(_settings, "_cache", {})
    monkeypatch.delenv("LOOPSCOPE_INTERNAL", raising=False)
    for flag, mode in [(True, "once"), (False, "none")]:
        with loopscope.profile(trace=False, syncs=False, metrics=False, warm_up=flag) as prof:
            pass
        assert prof.capture.info()["warm_up"] == mode
        enter = prof.summary()["overhead"]["enter_ms"]  # where the enter's time went
        assert set(enter) == {"before_start", "start", "after_start"}
        assert all(ms >= 0 for ms in enter.values())


# -- the counter availability image (ls_pmavail), issue 30 --------------------
# Kept by chip, device, driver and CUPTI version: a new process skips
# cuptiPmSamplingGetCounterAvailability (~155 ms on an H100); any change of
# those four reads another file (so a driver update asks CUPTI again).

AVAIL_KEY = dict(chip="GH100", device=0, driver="cuda 13000; NVRM version: 580.159.04",
                 cupti_version=130001)
AVAIL_IMAGE = bytes((i * 13) % 256 for i in range(3000))


def test_an_availability_image_comes_back_as_it_was_stored(tmp_path):
    assert _testhooks._pmavail("load", str(tmp_path), **AVAIL_KEY) == (0, None, None)
    _testhooks._pmavail("store", str(tmp_path), **AVAIL_KEY, image=AVAIL_IMAGE)
    assert _testhooks._pmavail("load", str(tmp_path), **AVAIL_KEY) == (1, AVAIL_IMAGE, None)


@pytest.mark.parametrize("change", [
    {"chip": "GB100"},
    {"device": 1},
    {"driver": "cuda 13000; NVRM version: 580.200.01"},
    {"driver": "cuda 13010; NVRM version: 580.159.04"},
    {"cupti_version": 130002},
])
def test_a_new_chip_device_driver_or_cupti_asks_cupti_again(tmp_path, change):
    _testhooks._pmavail("store", str(tmp_path), **AVAIL_KEY, image=AVAIL_IMAGE)
    found, image, _ = _testhooks._pmavail("load", str(tmp_path), **dict(AVAIL_KEY, **change))
    assert (found, image) == (0, None)
    # ... and the unchanged key still finds its own.
    assert _testhooks._pmavail("load", str(tmp_path), **AVAIL_KEY)[0] == 1


def test_a_damaged_availability_file_is_ignored_with_a_sentence(tmp_path):
    _testhooks._pmavail("store", str(tmp_path), **AVAIL_KEY, image=AVAIL_IMAGE)
    (path,) = [tmp_path / f for f in os.listdir(tmp_path)]
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    found, image, note = _testhooks._pmavail("load", str(tmp_path), **AVAIL_KEY)
    assert (found, image) == (-1, None) and note


def test_the_driver_identity_names_what_it_could_read():
    text = _testhooks._pmavail("driver", "", "", 0, "", 0)
    cuda, _, module = text.partition("; ")
    assert cuda.startswith("cuda ") and module
    if not os.path.exists("/proc/driver/nvidia/version"):
        assert module == "unknown"
