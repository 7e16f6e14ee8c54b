class CheckResult:
    pass


def check(*a, **k):
    raise NotImplementedError
