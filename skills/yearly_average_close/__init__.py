"""Skill yearly_average_close: Average closing price per year and ticker, from the bundled daily stock prices."""

from servers.data.summarize import summarize


def yearly_average_close():
    """Average closing price per year and ticker, from the bundled daily stock prices."""
    yearly = summarize('stock_prices', by='ticker', value='close', func='avg', period='year')
    return yearly
