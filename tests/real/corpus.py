"""The real-weight prompt corpus: the verdict must hold on any ordinary prompt, not on one.

`ISSUE_PROMPTS` are the eleven `--text` values of the report that found verify calling a healthy
model broken (exactly as a shell passes them: `\\n` is a backslash and an n); `VARIED` adds code
with real newlines, chat markup, JSON, numbers and several languages, 5 to 60 tokens each.
"""

from __future__ import annotations

ISSUE_PROMPTS = [
    "The capital of France is Paris, and the capital of Germany is",
    "In 1905 Albert Einstein published four papers that changed physics. The first explained the photoelectric effect, "
    "the second Brownian motion, the third special relativity, and the fourth",
    "def fibonacci(n):\\n    if n < 2:\\n        return n\\n    return",
    "Q: What is 17 times 23? A:",
    "import numpy as np\\nx = np.arange(10)\\nprint(x.",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "<|im_start|>user\\nExplain how a CPU cache works.<|im_end|>\\n<|im_start|>assistant\\n",
    "Der schnelle braune Fuchs springt über den faulen Hund, und dann",
    "1, 2, 3, 5, 8, 13, 21, 34,",
    "SELECT name, COUNT(*) FROM users WHERE age > 30 GROUP BY",
    "Once upon a time, in a small village at the edge of a great forest, there lived an old woodcutter and his wife. "
    "Every morning he",
]

VARIED = [
    "Hello, my name is",
    "for i in range(10):\n    if i % 2 == 0:\n        print(i)\n    else:\n        continue\n",
    '{"name": "portkit", "version": "0.1.0", "dependencies": {"numpy": ">=1.26", "safetensors":',
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is "
    "2+2?<|im_end|>\n<|im_start|>assistant\n",
    "Le petit prince demanda au renard : « Qu'est-ce que signifie apprivoiser ? » Le renard répondit",
    "El sol se pone detrás de las montañas y el cielo se vuelve",
    "東京は日本の首都であり、",
    "3.14159 2.71828 1.41421 1.73205",
    '#include <stdio.h>\nint main(void) {\n    printf("hello\\n");\n    return',
    'fn main() {\n    let v: Vec<u32> = (0..10).collect();\n    println!("{:?}",',
    "Step 1: Preheat the oven to 180°C.\nStep 2: Mix the flour and sugar.\nStep 3:",
    "| year | revenue |\n|------|---------|\n| 2021 | 1.2M    |\n| 2022 |",
    "The mitochondria is the powerhouse of the",
    "Dear Sir or Madam,\n\nI am writing to inform you that",
    "x = [1, 2, 3]; y = [a * 2 for a in x]; print(sum(y)) # prints",
    "Wikipedia is a free online encyclopedia, created and edited by volunteers around the world and hosted by the "
    "Wikimedia "
    "Foundation. It was launched in January 2001 by Jimmy Wales and Larry Sanger, and it has since become one of the "
    "most visited websites in the world, with articles in more than",
    "<|im_start|>user\nTranslate to German: good morning<|im_end|>\n<|im_start|>assistant\n",
    "2024-01-15T10:30:00Z INFO server started on port 8080\n2024-01-15T10:30:01Z WARN",
    "Roses are red,\nviolets are blue,\n",
    "Il était une fois une princesse qui vivait dans un château",
    "SELECT * FROM orders o JOIN customers c ON o.customer_id = c.id WHERE c.country = 'DE' ORDER BY",
    "The answer is 42.",
]

CORPUS = ISSUE_PROMPTS + VARIED
