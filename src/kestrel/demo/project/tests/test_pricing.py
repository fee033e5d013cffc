import unittest

from shop.pricing import apply_discount, order_total


class ApplyDiscountTest(unittest.TestCase):
    def test_fifteen_percent_off(self) -> None:
        self.assertEqual(apply_discount(2000, 15), 1700)

    def test_rounds_half_up(self) -> None:
        self.assertEqual(apply_discount(999, 50), 500)

    def test_no_discount(self) -> None:
        self.assertEqual(apply_discount(1234, 0), 1234)

    def test_rejects_more_than_everything(self) -> None:
        with self.assertRaises(ValueError):
            apply_discount(1000, 101)


class OrderTotalTest(unittest.TestCase):
    def test_quantities_count(self) -> None:
        self.assertEqual(order_total([(2, 1000), (1, 500)]), 2500)

    def test_discount_on_whole_order(self) -> None:
        self.assertEqual(order_total([(2, 1000), (1, 500)], discount_percent=10), 2250)


if __name__ == "__main__":
    unittest.main()
