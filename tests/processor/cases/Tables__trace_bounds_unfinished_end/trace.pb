
@èPZ
HXºfoo
@ÐPZ
HXºfoo
@¸PZ
HXºfoo