"""A run that says what it is doing: its logged progress lines carry the rate so far and the time left."""


def test_a_logged_progress_line_says_the_rate_and_the_time_left(capsys):
    from zoo.trainer.progress import ProgressBar, duration

    now = iter([100.0, 110.0, 130.0])
    bar = ProgressBar(total=500, done=100, clock=lambda: next(now))  # a resume from step 100
    bar.update(120, {"train/loss": 2.5})
    bar.update(200, {"train/loss": 1.5})
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["step 120/500 loss=2.5 | 2 steps/s, 3 min 10 s left",
                     "step 200/500 loss=1.5 | 3.33 steps/s, 1 min 30 s left"]
    assert [duration(s) for s in (45, 200, 3900)] == ["45 s", "3 min 20 s", "1 h 05 min"]
